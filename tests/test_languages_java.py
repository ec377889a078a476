"""Java sessions (issue 34.4): jjava's JShell kernel on a real Jupyter Server.

The kernel comes from scripts/install-languages.sh (the JDK through apt, jjava from PyPI),
which the test set-up runs. Boxed, its limits and its walls: tests/security/test_sandbox_java.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from traitlets.config import Config

from tests.nbrun import session_server_config
from tests.test_languages import error_of
from tests.test_sessions import Fetch, call, new_session, run, stdout

#: Where scripts/install-languages.sh puts the kernelspecs: this environment's.
SHARE = str(Path(sys.prefix) / "share" / "jupyter")


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, session_sandbox: str) -> Config:
    """Enable the extension, boxing sessions as the test says, with this environment's kernels."""
    config = session_server_config(monkeypatch, {})
    config.JupyterCI.session_sandbox = session_sandbox
    monkeypatch.setenv("JUPYTER_PATH", SHARE)  # pytest-jupyter hides them otherwise
    return config


@pytest.mark.parametrize("session_sandbox", ["never"])  # jjava's own kernelspec, unboxed
async def test_a_java_session_runs_java_with_its_env_and_directory(
        jp_fetch: Fetch, session_sandbox: str) -> None:
    session = await new_session(jp_fetch, language="Java", env={"GREETING": "hallo"})
    sid = session["id"]
    assert (session["language"], session["kernel_name"], session["sandboxed"]) == (
        "java", "java", False)
    result = await run(jp_fetch, sid, 'System.out.println(System.getenv("GREETING") + " " + '
                       'System.getProperty("user.dir"));\nint n = 6 * 7;\nn')
    assert result["status"] == "ok", result
    greeting, cwd = stdout(result).split()
    assert greeting == "hallo" and Path(cwd).name == sid
    assert result["outputs"][-1]["data"]["text/plain"] == "42"
    assert stdout(await run(jp_fetch, sid, "System.out.println(n + 1)")) == "43\n"
    # A thrown exception is an error named as Java names it (jjava says RuntimeException).
    error = error_of(await run(jp_fetch, sid, "int z = n / 0;"))
    assert (error["ename"], error["evalue"]) == ("ArithmeticException", "/ by zero")
    error = error_of(await run(jp_fetch, sid, 'throw new IllegalStateException("a, b")'))
    assert (error["ename"], error["evalue"]) == ("IllegalStateException", "a, b")
    await run(jp_fetch, sid, "class Refused extends RuntimeException {}")
    error = error_of(await run(jp_fetch, sid, "throw new Refused()"))  # REPL.$JShell$N$Refused
    assert (error["ename"], error["evalue"]) == ("Refused", "")
    error = error_of(await run(jp_fetch, sid, "undefinedName + 1"))
    assert error["ename"] == "CompilationException"
    # An execute naming its language: java (or jshell) runs, another is refused unrun.
    assert stdout(await run(jp_fetch, sid, "System.out.print(n)", language="JShell")) == "42"
    status, body = await call(jp_fetch, "POST", sid, "execute", body={
        "code": "print(1)", "language": "python"})
    assert (status, body["reason"]) == (400, "language_mismatch")
    # Java cannot change its own environment: a run's env is refused, the session's works.
    status, body = await call(jp_fetch, "POST", sid, "execute", body={
        "code": "System.out.println(1)", "env": {"RUN_ONLY": "yes"}})
    assert (status, body["reason"]) == (400, "env_not_supported")
    assert "not java" in body["message"] and "when creating it" in body["message"]
    status, exported = await call(jp_fetch, "GET", sid, "notebook")
    assert (status, exported["metadata"]["kernelspec"]["language"]) == (200, "java")


@pytest.mark.parametrize("session_sandbox", ["always"])
async def test_a_server_that_boxes_every_session_boxes_java(
        jp_fetch: Fetch, session_sandbox: str) -> None:
    session = await new_session(jp_fetch, language="java", env={"GREETING": "boxed"})
    sid = session["id"]
    assert (session["kernel_name"], session["sandboxed"]) == ("java-sandboxed", True)
    result = await run(jp_fetch, sid, 'System.out.println(System.getenv("GREETING") + " " + '
                       'System.getProperty("user.dir") + " " + '
                       'java.nio.file.Files.readString(java.nio.file.Path.of("/proc/1/comm")))')
    greeting, cwd, first = stdout(result).split()
    assert greeting == "boxed" and Path(cwd).name == sid
    assert first == "bwrap"  # its own PID namespace: in the box

