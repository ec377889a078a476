"""What a server says when it cannot enforce a box's limits (sandbox/guards.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_ci.server.sandbox import guards
from jupyter_ci.server.sandbox.box import Limits
from jupyter_ci.server.sessions.session import Session
from jupyter_ci.wire.codec import encode


def test_a_root_server_without_cgroups_says_the_process_limit_does_not_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    said = guards.unenforced(Limits(processes=64), with_cgroup=False)
    assert said is not None and "sandbox_processes" in said and "cgroup" in said
    assert guards.unenforced(Limits(processes=64), with_cgroup=True) is None
    assert guards.unenforced(Limits(processes=0), with_cgroup=False) is None  # no limit asked
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # RLIMIT_NPROC holds for others
    assert guards.unenforced(Limits(processes=64), with_cgroup=False) is None


def test_the_session_info_says_so() -> None:
    session = Session("s", "k", "python3-sandboxed", Path("/tmp"), None, None,  # type: ignore[arg-type]
                      sandboxed=True, unenforced="a box does not enforce sandbox_processes")
    assert encode(session.info())["sandbox_unenforced"].endswith("sandbox_processes")
    session.unenforced = ""
    assert "sandbox_unenforced" not in encode(session.info())
