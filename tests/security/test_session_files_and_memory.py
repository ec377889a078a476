"""Attacks on REST sessions, tried as an attacker would: a symlink race on the files routes,
and outputs big enough to make the server keep hundreds of MB.

Real Jupyter Server (pytest-jupyter), real kernels: the session's own code is the attacker.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.test_sessions import (
    call,
    ci_config,
    jp_server_config,
    more_config,
    new_session,
    run,
    stdout,
    stream,
)

__all__ = ["ci_config", "jp_server_config", "more_config"]  # fixtures, used by name

Fetch = Any
MiB = 1024 * 1024

INSIDE = b"inside: the session's own secret\n"
OUTSIDE = b"outside: not the session's to give\n"
PASSWD = b"root:inside the session, not /etc\n"
#: The files the session's own `d` and `e` hold (or may: the test uploads new.txt).
INSIDE_NAMES = {"secret.txt", "victim.txt", "new.txt", "passwd"}

#: Kernel code that starts a thread swapping `d` (a real folder) with `swap` (a symlink to a
#: folder outside the session) as fast as it can, atomically (renameat2 RENAME_EXCHANGE), so
#: that `d` always exists and is a folder or a link at any instant; the same for `e` and
#: /etc. It also puts back `d/victim.txt` whenever a delete took it.
SWAPPER = """
import ctypes, os, threading
_libc = ctypes.CDLL(None, use_errno=True)
for name, link, files in (("d", {outside!r}, {{"secret.txt": {inside!r}}}),
                          ("e", "/etc", {{"passwd": {passwd!r}}})):
    os.mkdir(name)
    for file, data in files.items():
        open(os.path.join(name, file), "wb").write(data)
    os.symlink(link, name + "_swap")
open("d/victim.txt", "wb").write(b"inside victim")
_real = os.open("d", os.O_RDONLY | os.O_DIRECTORY)
_stop, _swaps = threading.Event(), [0]

def _swap():
    while not _stop.is_set():
        for name in (b"d", b"e"):
            if _libc.renameat2(-100, name, -100, name + b"_swap", 2) != 0:  # RENAME_EXCHANGE
                raise OSError(ctypes.get_errno(), "renameat2")
        _swaps[0] += 1
        try:
            os.stat("victim.txt", dir_fd=_real)
        except FileNotFoundError:
            fd = os.open("victim.txt", os.O_WRONLY | os.O_CREAT, dir_fd=_real)
            os.write(fd, b"inside victim")
            os.close(fd)

_thread = threading.Thread(target=_swap, daemon=True)
_thread.start()
"""


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


async def _fetch(jp_fetch: Fetch, sid: str, method: str, path: str,
                 body: bytes | None = None) -> tuple[int, bytes]:
    # Straight through tornado's client (no OpenAPI check per reply): thousands of requests.
    response = await jp_fetch("jupyter-ci", "sessions", sid, "files", *path.split("/"),
                              method=method, body=body, raise_error=False)
    return response.code, response.body or b""


@pytest.mark.skipif(sys.platform != "linux", reason="renameat2(RENAME_EXCHANGE) is Linux's")
async def test_a_folder_swapped_for_a_symlink_never_lets_the_files_routes_out(
    jp_fetch: Fetch, tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(OUTSIDE)
    (outside / "victim.txt").write_bytes(b"outside victim")
    (outside / "outside-only.txt").write_bytes(b"listed only if a walk went out")
    before = _tree(outside)
    sid = (await new_session(jp_fetch))["id"]
    started = await run(jp_fetch, sid, SWAPPER.format(outside=str(outside), inside=INSIDE,
                                                      passwd=PASSWD))
    assert started["status"] == "ok", started
    seen: Counter[tuple[str, int, bytes]] = Counter()
    try:
        began, downloads = time.monotonic(), 0
        while downloads < 6000 and time.monotonic() - began < 25:
            batch = await asyncio.gather(*(
                _fetch(jp_fetch, sid, "GET", path) for path in ("d/secret.txt", "e/passwd") * 4))
            for path, (code, body) in zip(("d", "e") * 4, batch, strict=True):
                seen[path, code, body if code == 200 else b""] += 1
            downloads += len(batch)
        rate = downloads / (time.monotonic() - began)
        writes: Counter[tuple[str, int]] = Counter()
        for _ in range(150):
            # Writes only through `d`: tests may run as root, and /etc is not theirs to try.
            batch = await asyncio.gather(*(
                _fetch(jp_fetch, sid, "PUT", "d/new.txt", b"uploaded"),
                _fetch(jp_fetch, sid, "DELETE", "d/victim.txt")) * 2)
            for what, (code, _) in zip(("put", "delete") * 2, batch, strict=True):
                writes[what, code] += 1
        # Listings, and the files each run reports as changed, walk the directory meanwhile.
        listed: set[str] = set()
        for _ in range(100):
            for response in await asyncio.gather(
                    jp_fetch("jupyter-ci", "sessions", sid, "files", raise_error=False),
                    jp_fetch("jupyter-ci", "sessions", sid, "execute", method="POST",
                             body=b'{"code": "pass"}', raise_error=False)):
                writes["list or run", response.code] += 1
                if response.code == 200:
                    reply = json.loads(response.body)
                    listed.update(f["path"] for f in (
                        reply if isinstance(reply, list) else reply["files"]))
    finally:
        swaps = stdout(await run(jp_fetch, sid, "_stop.set()\n_thread.join()\n"
                                                "print(_swaps[0])"))
    leaks = sum(n for (_, code, body), n in seen.items()
                if code == 200 and body not in (INSIDE, PASSWD))
    outcomes = Counter({(path, code, body in (INSIDE, PASSWD, b"")): n
                        for (path, code, body), n in seen.items()})
    print(f"\n{downloads} downloads in {time.monotonic() - began:.1f} s ({rate:.0f}/s), "
          f"{swaps.strip()} swaps; (path, status, from inside): {dict(outcomes)}; "
          f"writes {dict(writes)}; leaks {leaks}; outside now {sorted(_tree(outside))}")
    went_out = sorted(p for p in listed if p.split("/")[0] in ("d", "e", "d_swap", "e_swap")
                      and p.split("/", 1)[1] not in INSIDE_NAMES and ".upload-" not in p)
    print(f"listed {len(listed)} paths; from outside: {went_out}")
    assert went_out == [], "a listing or a run's files walked through the symlink"
    assert all(code in (200, 201, 204, 400, 404) for _, code in writes), writes
    assert (leaks, _tree(outside)) == (0, before), \
        f"{leaks} of {downloads} downloads served a file outside the session, or a write " \
        "or delete went through the symlink"
    assert downloads >= 2000 and int(swaps) > 1000, (downloads, swaps)
    assert all(code in (200, 400, 404) for _, code, _ in seen), seen


def _rss() -> tuple[int, int]:
    """Return this process's (the server's) resident and peak memory, in MiB."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text()
                  .splitlines() if ":" in line)
    return (int(status["VmRSS"].split()[0]) // 1024, int(status["VmHWM"].split()[0]) // 1024)


def _history(jp_serverapp: Any, sid: str) -> list[dict[str, Any]]:
    return list(jp_serverapp.web_app.settings["jupyter_ci_sessions"].get(sid).history)


def _outputs_size(cell: dict[str, Any]) -> int:
    return max((len(json.dumps(o)) for o in cell.get("outputs", [])), default=0)


#: Prints `mb` MB in lines of 100 bytes (many stream messages, as a real flood is).
FLOOD = ("import sys\nline = '{tag}' * 99 + '\\n'\n"
         "for _ in range({mb} * 10_000): sys.stdout.write(line)")


async def test_a_session_that_prints_hundreds_of_mb_keeps_a_bounded_notebook(
    jp_fetch: Fetch, jp_serverapp: Any,
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    gc.collect()
    rss_before = _rss()
    assert stdout(await run(jp_fetch, sid, "print('small')")) == "small\n"
    for tag in "abc":
        result = await run(jp_fetch, sid, FLOOD.format(tag=tag, mb=40), timeout=60)
        assert result["status"] == "ok"
        del result
    html = await run(jp_fetch, sid, "from IPython.display import HTML\n"
                                    "HTML('<p>' + 'x' * 3_000_000 + '</p>')")
    del html
    gc.collect()
    rss_after = _rss()
    history = _history(jp_serverapp, sid)
    kept = len(json.dumps(history))
    print(f"\nhistory kept {kept / MiB:.2f} MiB of 120 MB printed; server RSS before "
          f"{rss_before[0]} MiB, after {rss_after[0]} MiB (peak {rss_after[1]} MiB)")
    assert kept < 32 * MiB, f"the session keeps {kept / MiB:.1f} MiB for its notebook"
    assert all(_outputs_size(cell) < 1.01 * MiB for cell in history)
    assert history[0]["outputs"] == [{"output_type": "stream", "name": "stdout",
                                      "text": "small\n"}]  # a normal run is kept whole
    code, nb = await call(jp_fetch, "GET", sid, "notebook")
    assert code == 200 and len(nb["cells"]) == 5
    flood = nb["cells"][1]["outputs"][0]["text"]
    text = "".join(flood) if isinstance(flood, list) else flood
    assert text.startswith("a" * 99 + "\n") and text.endswith("a" * 99 + "\n")
    assert "MB cut: the session's notebook keeps at most 1 MiB per output " \
           "(c.JupyterCI.session_history_output_bytes)" in text
    display = nb["cells"][4]["outputs"][0]
    assert "<p>" not in json.dumps(display)
    assert "session_history_output_bytes" in "".join(display["data"]["text/plain"])


@pytest.mark.parametrize("ci_config", [{"session_pool": 0, "session_history_bytes": 3 * MiB}])
async def test_the_oldest_outputs_go_first_and_the_history_stays_flat(
    jp_fetch: Fetch, jp_serverapp: Any,
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    sizes = []
    for n in range(8):
        await run(jp_fetch, sid, FLOOD.format(tag=n, mb=3))
        sizes.append(len(json.dumps(_history(jp_serverapp, sid))))
    print(f"\nhistory after each of 8 runs of 3 MB: {[round(s / MiB, 2) for s in sizes]} MiB")
    assert max(sizes) <= 3 * MiB and sizes[-1] <= sizes[3] * 1.05, sizes
    code, nb = await call(jp_fetch, "GET", sid, "notebook")
    assert code == 200
    sources = [cell["source"] for cell in nb["cells"]]
    assert sources == [FLOOD.format(tag=n, mb=3) for n in range(8)]  # sources kept
    first = json.dumps(nb["cells"][0]["outputs"])
    assert "c.JupyterCI.session_history_bytes" in first and "0" * 99 not in first
    last = "".join(nb["cells"][-1]["outputs"][0]["text"])
    assert last.startswith("7" * 99)


@pytest.mark.parametrize("ci_config", [{"session_pool": 0, "session_run_output_bytes": 2 * MiB}])
async def test_one_run_keeps_a_bounded_result_while_its_stream_carries_every_chunk(
    jp_fetch: Fetch,
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    code = FLOOD.format(tag="s", mb=8)
    events = await stream(jp_fetch, sid, code, request_timeout=60)
    streamed = sum(len(data["text"]) for _, kind, data in events if kind == "output")
    result = events[-1][2]
    assert events[-1][1] == "result" and result["status"] == "ok"
    assert streamed == 8_000_000  # live, every chunk whole
    kept = stdout(result)
    assert len(json.dumps(result)) < 2.1 * MiB
    assert kept.startswith("s" * 99 + "\n") and kept.endswith("s" * 99 + "\n")
    assert "(c.JupyterCI.session_run_output_bytes)" in kept
    plain = await run(jp_fetch, sid, code)
    assert len(json.dumps(plain)) < 2.1 * MiB


def test_a_flood_of_tiny_prints_keeps_its_head_and_tail_and_tells_every_chunk() -> None:
    from jupyter_ci.server.sessions.capped import CappedOutputs

    told: list[Any] = []
    outputs = CappedOutputs(told.append, limit=64 * 1024)
    began = time.monotonic()
    for i in range(300_000):
        outputs.apply("stream", {"name": "stdout", "text": f"{i}\n"})
    kept = outputs.merged()
    assert time.monotonic() - began < 10  # linear: about 2 s for a million here
    assert len(told) == 300_000 and told[-1].output["text"] == "299999\n"
    assert len(kept) == 1 and len(json.dumps(kept)) < 64 * 1024
    text = kept[0]["text"]
    assert text.startswith("0\n1\n2\n") and text.endswith("299998\n299999\n")
    assert "MB cut: an execute keeps at most 64 KiB of outputs for its result " \
           "(c.JupyterCI.session_run_output_bytes)" in text
    outputs.apply("clear_output", {"wait": False})  # a progress display starts over
    outputs.apply("stream", {"name": "stderr", "text": "done\n"})
    assert outputs.merged() == [{"output_type": "stream", "name": "stderr", "text": "done\n"}]


def test_displays_and_their_updates_are_kept_within_the_cap() -> None:
    from jupyter_ci.server.sessions.capped import CappedOutputs

    outputs = CappedOutputs(None, limit=4000)
    for i in range(100):
        outputs.apply("display_data", {"data": {"text/plain": f"{i:03d}" * 30}, "metadata": {},
                                       "transient": {"display_id": f"d{i}"}})
    outputs.apply("update_display_data", {"data": {"text/html": "x" * 10**6}, "metadata": {},
                                          "transient": {"display_id": "d99"}})
    outputs.apply("update_display_data", {"data": {"text/plain": "first, updated"},
                                          "metadata": {}, "transient": {"display_id": "d0"}})
    for i in range(1000):  # displays of earlier runs, updated: kept within the cap too
        outputs.apply("update_display_data", {"data": {"text/plain": "y" * 1000},
                                              "metadata": {}, "transient": {"display_id": i}})
    kept = outputs.merged()
    assert len(json.dumps(kept)) < 4000 and len(json.dumps(outputs.updated_elsewhere())) < 4000
    assert kept[0]["data"] == {"text/plain": "first, updated"}
    notes = [out["text"] for out in kept if out["output_type"] == "stream"]
    assert len(notes) == 1 and "kB cut" in notes[0]  # displays from the middle, dropped
    assert kept[-1]["data"]["text/plain"].startswith("[… text/html of 1.0 MB cut: ")


def test_the_history_caps_outputs_and_a_restart_empties_it() -> None:
    from jupyter_ci.server.sessions.results import History

    history = History(output_limit=1000, limit=8000)
    history.append({"cell_type": "markdown", "source": "**Ask:** " + "q" * 100})
    for n in range(20):
        history.append({"cell_type": "code", "source": f"run({n})", "execution_count": n,
                        "outputs": [{"output_type": "error", "ename": "E", "evalue": "v" * 5000,
                                     "traceback": ["t" * 500] * 20},
                                    {"output_type": "stream", "name": "stdout", "text": "ok\n"}]})
        # Sources (and the notes that stand for dropped outputs) are kept.
        assert len(json.dumps(list(history))) < 8000
    cells = list(history)
    assert [c["source"] for c in cells[1:]] == [f"run({n})" for n in range(20)]
    assert "session_history_bytes" in json.dumps(cells[1]["outputs"])
    assert "session_history_output_bytes" in json.dumps(cells[-1]["outputs"][0])
    assert cells[-1]["outputs"][1]["text"] == "ok\n"
    history.clear()
    assert len(history) == 0 and history.size == 0


def test_a_walk_never_enters_a_symlinked_folder(tmp_path: Path) -> None:
    from jupyter_ci import workdir

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("x")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "mine.txt").write_text("mine")
    (tmp_path / "in" / "link").symlink_to(outside)
    (tmp_path / "in" / "file-link.txt").symlink_to(outside / "secret.txt")
    assert list(workdir.snapshot(tmp_path / "in")) == ["mine.txt"]
    assert workdir.snapshot(tmp_path / "in" / "link") == {}  # the top itself, too
