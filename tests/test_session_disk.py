"""Counting a session's folder for its disk caps (sessions/disk.py): bounded, links not followed.

The caps stopping runs in real boxes are tests/security/test_sandbox_limits.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from jupyter_ci.server.sessions.disk import Caps, Usage, Watch, count


def test_a_count_reads_a_bounded_number_of_entries_and_follows_no_link(tmp_path: Path) -> None:
    many = tmp_path / "many"
    many.mkdir()
    for i in range(5000):
        (many / str(i)).touch()
    (tmp_path / "data.bin").write_bytes(b"x" * (1 << 20))
    os.symlink("/", tmp_path / "root")  # not followed: / is not this folder's
    caps = Caps(bytes=0, files=1000)
    found = count(tmp_path, caps.most)
    # Over the cap after 3,000 entries at most, whatever the folder holds.
    assert not found.complete and found.files == caps.most + 1
    whole = count(tmp_path, 100_000)
    assert whole.complete and whole.files == 5000 + 3
    assert (1 << 20) <= whole.bytes < (2 << 20) + 5000 * 4096
    assert caps.over(whole) is not None and "5,003 files" in str(caps.over(whole))
    assert "or more" in str(caps.over(found))


def test_a_cap_says_which_setting_and_what_to_do() -> None:
    caps = Caps(bytes=64 << 20, files=10)
    assert caps.over(Usage(64 << 20, 10)) is None
    said = str(caps.over(Usage(100 << 20, 11)))
    assert "100.0 MiB on disk, over its cap of 64.0 MiB (c.JupyterCI.sandbox_disk_bytes)" in said
    assert "sandbox_disk_files" in said and "delete files" in said


def test_only_growth_past_a_cap_stops_a_run(tmp_path: Path) -> None:
    watch = Watch(tmp_path, Caps(bytes=1 << 20, files=0), Usage(5 << 20, 3))
    assert not watch._grew(Usage(4 << 20, 3))  # deleting, still over: it goes on
    assert watch._grew(Usage(6 << 20, 3)) and watch._grew(Usage(4 << 20, 4))
    assert watch._grew(Usage(4 << 20, 3, complete=False))  # unknown counts as grown
