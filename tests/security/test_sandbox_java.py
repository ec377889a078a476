"""A Java session is boxed like the other languages (issue 34.4), its JVM sized to the box.

jjava's ZMQ (JeroMQ) has no ipc transport: like Deno's, its TCP is forwarded into the box
(the `java-sandboxed` kernelspec of scripts/install-languages.sh). Its JVM takes half of the
box's data limit (sandbox_memory_bytes) for its heap: it starts under a small box (memory
and process count), a too large allocation is an OutOfMemoryError and the kernel lives (at
the JVM's default heap, a quarter of the machine's memory, the heap outgrew the box and the
JVM died). Its code reaches no network, not the server's token nor runtime folder, and a
run's timeout stops a loop and leaves the kernel alive. As an unprivileged user and as root.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.test_sandbox import call
from tests.security.test_sandbox_deno import printed, run
from tests.security.unprivileged import WHO, Server, running

#: Where scripts/install-languages.sh puts the kernelspecs (java-sandboxed among them).
SHARE = str(Path(sys.prefix) / "share" / "jupyter")
#: A small box: 1 GiB of memory, 64 processes and threads.
MEMORY, PROCESSES = 1 << 30, 64

PROBE = """
String report = "";
for (String url : new String[] {"{server}", "http://1.1.1.1/"}) {
  try {
    var c = (java.net.HttpURLConnection) new java.net.URL(url).openConnection();
    c.setConnectTimeout(5000);
    c.getResponseCode();
    report += "reached ";
  } catch (Exception e) {
    report += "refused ";
  }
}
java.io.File[] names = new java.io.File("{runtime}").listFiles();
if (names == null) report += "unreadable";
else for (java.io.File f : names) {
  try { report += f.getName() + java.nio.file.Files.readString(f.toPath()); }
  catch (Exception e) { report += f.getName() + ":unreadable "; }
}
System.out.println(report);
"""


@pytest.fixture(scope="module", params=WHO)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A server boxing every session in a small box, run by this parameter's user."""
    ci = {"session_pool": 0, "session_sandbox": "always", "sandbox_memory_bytes": MEMORY,
          "sandbox_processes": PROCESSES}
    with running(request.param, ci, {"JUPYTER_PATH": SHARE}) as started:
        yield started


def test_a_java_session_runs_in_a_box_its_heap_inside_the_boxs_memory(server: Server) -> None:
    status, session = call(server, "POST", "jupyter-ci/sessions", {"language": "java"})
    assert status == 201, session
    sid = session["id"]
    try:
        assert (session["kernel_name"], session["sandboxed"]) == ("java-sandboxed", True)
        result = run(server, sid, 'System.out.println(System.getProperty("user.dir") + " " + '
                     'Runtime.getRuntime().maxMemory() + " " + '
                     'new java.io.File("/proc/self/task").list().length)')
        assert result["status"] == "ok", result
        cwd, heap, threads = printed(result).split()
        assert Path(cwd).name == sid and int(heap) <= MEMORY // 2
        assert int(threads) < PROCESSES  # the JVM's threads (28 here) count as processes
        run(server, sid, "int kept = 7;")
        big = run(server, sid, f"byte[] big = new byte[{MEMORY * 3 // 4}];")
        assert big["status"] == "error", big
        error = next(o for o in big["outputs"] if o["output_type"] == "error")
        assert error["ename"] == "OutOfMemoryError", big
        after = run(server, sid, "System.out.println(kept)")
        assert (after["status"], printed(after)) == ("ok", "7\n"), after
    finally:
        call(server, "DELETE", f"jupyter-ci/sessions/{sid}")


def test_a_boxed_java_session_reaches_nothing_and_stops_on_its_timeout(server: Server) -> None:
    status, session = call(server, "POST", "jupyter-ci/sessions", {"language": "jshell"})
    assert status == 201, session
    sid = session["id"]
    try:
        runtime = server.info["runtime_dir"]
        report = run(server, sid, PROBE.replace("{server}", server.url)
                     .replace("{runtime}", runtime))
        assert report["status"] == "ok", report
        out = printed(report)
        assert server.token not in out
        assert out.startswith("refused refused "), out
        assert out.rstrip().endswith("unreadable") or out.split() == ["refused", "refused"], out
        run(server, sid, "int kept = 7;")
        looping = run(server, sid, "while (true) {}", timeout=3)
        assert looping["status"] == "timeout", looping
        after = run(server, sid, "System.out.println(kept)")
        assert (after["status"], printed(after)) == ("ok", "7\n"), after
    finally:
        call(server, "DELETE", f"jupyter-ci/sessions/{sid}")
