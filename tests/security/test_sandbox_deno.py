"""A Deno session is boxed too (issue 31.5): its ZMQ over TCP forwarded into the box.

Deno's kernel listens on TCP only; its box has its own network namespace, and a forwarder in
it takes the host's ipc connections to the kernel's ports on the box's loopback
(sandbox/zmq_forward.py; the `deno-sandboxed` kernelspec of scripts/install-languages.sh).
A REST session asking for JavaScript runs in it: its code runs, reaches no network (not
the server's port either), cannot read the server's token or runtime folder, and an
interrupt (a run's timeout) stops a loop and leaves the kernel alive. As an unprivileged
user (its box under the seccomp filter that refuses shared memory) and as root (its cgroup).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.test_sandbox import call
from tests.security.unprivileged import WHO, Server, running

#: Where scripts/install-languages.sh puts the kernelspecs (deno-sandboxed among them).
SHARE = str(Path(sys.prefix) / "share" / "jupyter")

PROBE = """
const report: Record<string, string> = {{}};
for (const [name, url] of [["server", "{server}"], ["outside", "http://1.1.1.1/"]]) {{
  try {{
    await fetch(url, {{ signal: AbortSignal.timeout(5000) }});
    report[name] = "reached";
  }} catch (e) {{
    report[name] = "refused";
  }}
}}
try {{
  const names = [...Deno.readDirSync("{runtime}")].map((e) => e.name);
  report.runtime = names.join(",") || "empty";
  for (const name of names) report.runtime += Deno.readTextFileSync("{runtime}/" + name);
}} catch (e) {{
  report.runtime = "unreadable";
}}
console.log(JSON.stringify(report));
"""


@pytest.fixture(scope="module", params=WHO)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A server with the installed languages' kernelspecs, run by this parameter's user."""
    with running(request.param, {"session_pool": 0, "session_sandbox": "always"},
                 {"JUPYTER_PATH": SHARE}) as started:
        yield started


def run(server: Server, sid: str, code: str, timeout: float = 60) -> dict[str, Any]:
    """Execute code in a session; return the API's result."""
    status, result = call(server, "POST", f"jupyter-ci/sessions/{sid}/execute",
                          {"code": code, "timeout": timeout}, timeout=timeout + 60)
    assert status == 200, result
    return dict(result)


def printed(result: dict[str, Any]) -> str:
    """Return what a run printed."""
    return "".join(o["text"] for o in result["outputs"] if o["output_type"] == "stream")


def test_a_javascript_session_runs_deno_in_a_box(server: Server) -> None:
    status, session = call(server, "POST", "jupyter-ci/sessions", {"language": "javascript"})
    assert status == 201, session
    sid = session["id"]
    try:
        assert (session["kernel_name"], session["sandboxed"]) == ("deno-sandboxed", True)
        result = run(server, sid, "const n: number = 6 * 7; console.log(n, Deno.cwd())")
        assert result["status"] == "ok", result
        answer, cwd = printed(result).split()
        assert answer == "42" and Path(cwd).name == sid
        runtime = server.info["runtime_dir"]
        report = run(server, sid, PROBE.format(server=server.url, runtime=runtime))
        assert report["status"] == "ok", report
        out = printed(report)
        assert server.token not in out
        assert '"server":"refused"' in out and '"outside":"refused"' in out, out
        assert '"runtime":"unreadable"' in out or '"runtime":"empty"' in out, out
        # A run's timeout interrupts it (a message on the control channel, through the
        # forwarder): the loop stops and the kernel, its variables, live on.
        run(server, sid, "globalThis.kept = 7")
        looping = run(server, sid, "while (true) {}", timeout=3)
        assert looping["status"] == "timeout", looping
        after = run(server, sid, "console.log('after', globalThis.kept)")
        assert (after["status"], printed(after)) == ("ok", "after 7\n"), after
    finally:
        call(server, "DELETE", f"jupyter-ci/sessions/{sid}")
