"""Sessions in other languages: bash, JavaScript (Deno) and R kernels on a real Jupyter Server.

The kernels come from scripts/install-languages.sh, which the test set-up runs (with R).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.server.sessions.languages import env_prelude, normalize
from tests.nbrun import session_server_config
from tests.test_sessions import Fetch, call, new_session, run, stdout

#: Where scripts/install-languages.sh puts the kernelspecs: this environment's.
SHARE = str(Path(sys.prefix) / "share" / "jupyter")


@pytest.fixture
def session_sandbox() -> str:
    """c.JupyterCI.session_sandbox of the test's server: the default unless a test says."""
    return "auto"


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, session_sandbox: str) -> Config:
    """Enable the extension (a model is configured, so only the language refuses an ask)."""
    config = session_server_config(monkeypatch, {"OPENAI_API_KEY": "sk-test-0123456789abcdef"})
    config.JupyterCI.session_sandbox = session_sandbox
    # pytest-jupyter hides this environment's Jupyter folders: show its kernelspecs again.
    monkeypatch.setenv("JUPYTER_PATH", SHARE)
    return config


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    """Return the one error output of a run that failed."""
    assert result["status"] == "error", result
    errors = [o for o in result["outputs"] if o["output_type"] == "error"]
    assert len(errors) == 1, result
    return errors[0]


async def with_envs(jp_fetch: Fetch, sid: str, language: str, envs: dict[str, str],
                    code: str) -> dict[str, Any]:
    """Run code with per-run variables: the execute's `env`, set by env_prelude's code."""
    assert all(env_prelude(language, envs))  # the language has its own set-up and restore
    return await run(jp_fetch, sid, code, env=envs)


async def test_a_bash_session_runs_bash_with_its_env_and_directory(jp_fetch: Fetch) -> None:
    session = await new_session(jp_fetch, language="bash", env={"GREETING": "hello there"})
    sid = session["id"]
    # Boxed where bubblewrap works (session_sandbox "auto"), as Python is.
    assert session["language"] == "bash"
    assert session["kernel_name"] == ("bash-sandboxed" if session["sandboxed"] else "bash")
    result = await run(jp_fetch, sid, 'echo "$BASH_VERSION"; echo "$GREETING"; pwd')
    assert result["status"] == "ok"
    version, greeting, cwd = stdout(result).splitlines()
    assert version[0].isdigit() and greeting == "hello there"
    assert Path(cwd).name == sid and Path(cwd).is_dir()
    error = error_of(await run(jp_fetch, sid, "ls /no/such/dir"))
    assert error["ename"] == "ExitStatus" and "status 2" in error["evalue"]
    # Per-run variables: a new one, and one the session had, restored after the run.
    envs = {"GREETING": "it's \"quoted\" $HOME", "RUN_ONLY": "yes"}
    inside = await with_envs(jp_fetch, sid, "bash", envs, 'echo "$GREETING|$RUN_ONLY"')
    assert stdout(inside) == "it's \"quoted\" $HOME|yes\n"
    after = await run(jp_fetch, sid, 'echo "$GREETING|${RUN_ONLY-unset}"; '
                      'bash -c \'echo "$GREETING"\'')
    assert stdout(after) == "hello there|unset\nhello there\n"
    status, exported = await call(jp_fetch, "GET", sid, "notebook")
    assert (status, exported["metadata"]["kernelspec"]["language"]) == (200, "bash")
    status, body = await call(jp_fetch, "POST", sid, "ask", body={"prompt": "list the files"})
    assert (status, body["reason"]) == (400, "ask_needs_python")
    assert "runs bash" in body["message"] and "create a Python session" in body["message"]


@pytest.mark.parametrize("session_sandbox", ["never"])  # unboxed: Deno's own kernelspec
async def test_a_javascript_session_runs_deno(jp_fetch: Fetch, session_sandbox: str) -> None:
    session = await new_session(jp_fetch, language="JavaScript", env={"GREETING": "hi"})
    sid = session["id"]
    assert (session["language"], session["kernel_name"]) == ("typescript", "deno")
    result = await run(jp_fetch, sid, 'console.log(Deno.env.get("GREETING"), Deno.cwd())\n'
                       "const n: number = 6 * 7; n")
    assert result["status"] == "ok"
    greeting, cwd = stdout(result).split()
    assert greeting == "hi" and Path(cwd).name == sid
    assert result["outputs"][-1]["data"]["text/plain"] == "42"  # plain: no ANSI colours
    for i in range(20):  # Deno may publish a run's idle before its outputs: none is lost
        again = await run(jp_fetch, sid, f"console.log('run {i}'); {i} * 2")
        assert stdout(again) == f"run {i}\n"
        assert again["outputs"][-1]["data"]["text/plain"] == str(i * 2)
    error = error_of(await run(jp_fetch, sid, 'throw new TypeError("no such thing")'))
    assert (error["ename"], error["evalue"]) == ("TypeError", "no such thing")
    envs = {"GREETING": "per run", "RUN_ONLY": "yes"}
    inside = await with_envs(jp_fetch, sid, "javascript", envs,
                             'console.log(Deno.env.get("GREETING"), process.env.RUN_ONLY)')
    assert stdout(inside) == "per run yes\n"
    after = await run(jp_fetch, sid, 'console.log(Deno.env.get("GREETING"), '
                      '"RUN_ONLY" in Deno.env.toObject())')
    assert stdout(after) == "hi false\n"


async def test_an_r_session_runs_r(jp_fetch: Fetch) -> None:
    session = await new_session(jp_fetch, language="R", env={"GREETING": "hej"})
    sid = session["id"]
    assert session["language"] == "r"
    assert session["kernel_name"] == ("ir-sandboxed" if session["sandboxed"] else "ir")
    result = await run(jp_fetch, sid, 'cat(Sys.getenv("GREETING"), getwd(), "\\n")\n6 * 7')
    assert result["status"] == "ok", result
    greeting, cwd = stdout(result).split()
    assert greeting == "hej" and Path(cwd).name == sid
    assert result["outputs"][-1]["data"]["text/plain"] == "[1] 42"  # IRkernel: display_data
    error = error_of(await run(jp_fetch, sid, 'stop("no such thing")'))
    assert error["ename"] == "ERROR" and "no such thing" in error["evalue"]
    envs = {"GREETING": "per run \"quoted\" é", "RUN_ONLY": "yes"}
    inside = await with_envs(jp_fetch, sid, "r", envs,
                             'cat(Sys.getenv("GREETING"), Sys.getenv("RUN_ONLY"), sep = "|")')
    assert stdout(inside) == 'per run "quoted" é|yes'
    after = await run(jp_fetch, sid, 'cat(Sys.getenv("GREETING"), '
                      'Sys.getenv("RUN_ONLY", unset = "unset"), sep = "|")')
    assert stdout(after) == "hej|unset"


async def test_an_unknown_language_is_refused_with_the_installed_ones(jp_fetch: Fetch) -> None:
    status, body = await call(jp_fetch, "POST", body={"language": "cobol"})
    assert (status, body["reason"]) == (400, "unknown_language")
    for language in ("bash", "javascript", "python", "typescript"):
        assert language in body["message"]
    status, body = await call(jp_fetch, "POST", body={"language": "bash",
                                                      "kernel_name": "python3"})
    assert (status, body["reason"]) == (400, "unknown_language")
    assert "runs python, not bash" in body["message"]
    status, sessions = await call(jp_fetch, "GET")
    assert (status, sessions) == (200, [])


async def test_a_python_session_says_so(jp_fetch: Fetch) -> None:
    session = await new_session(jp_fetch, language="py")
    assert session["language"] == "python"
    sid, check = session["id"], "import os; print(os.environ.get('RUN_ONLY'))"
    inside = await with_envs(jp_fetch, sid, "python", {"RUN_ONLY": "it's"}, check)
    assert stdout(inside) == "it's\n"
    assert stdout(await run(jp_fetch, sid, check)) == "None\n"


@pytest.mark.parametrize("session_sandbox", ["always"])
async def test_a_server_that_boxes_every_session_boxes_bash_and_deno(
    jp_fetch: Fetch, session_sandbox: str
) -> None:
    session = await new_session(jp_fetch, language="bash", env={"GREETING": "boxed"})
    assert (session["kernel_name"], session["sandboxed"]) == ("bash-sandboxed", True)
    result = await run(jp_fetch, session["id"], 'echo "$GREETING"; pwd; cat /proc/1/comm')
    greeting, cwd, first = stdout(result).split()
    assert greeting == "boxed" and Path(cwd).name == session["id"]
    assert first == "bwrap"  # its own PID namespace: in the box
    # Deno too (its ZMQ over TCP forwarded into the box: tests/security/test_sandbox_deno.py);
    # a kernel without a sandboxed kernelspec is refused: tests/security/test_session_choice.py.
    deno = await new_session(jp_fetch, language="js")
    assert (deno["kernel_name"], deno["sandboxed"]) == ("deno-sandboxed", True)
    result = await run(jp_fetch, deno["id"], "console.log(Deno.readTextFileSync('/proc/1/comm'))")
    assert stdout(result).strip() == "bwrap", result


def test_env_prelude_refuses_what_it_cannot_set() -> None:
    assert normalize(" TS ") == "typescript" and normalize("R") == "r"
    assert env_prelude("bash", {}) == ("", "")
    with pytest.raises(ValueError, match="not variable names"):
        env_prelude("bash", {"A; rm -rf /": "x"})
    with pytest.raises(ValueError, match="not supported in julia"):
        env_prelude("Julia", {"A": "x"})


async def test_a_run_in_another_language_than_its_sessions_is_refused_unrun(
        jp_fetch: Fetch) -> None:
    session = await new_session(jp_fetch, language="bash")
    sid = session["id"]
    status, body = await call(jp_fetch, "POST", sid, "execute", body={
        "code": "echo ran > ran.txt", "language": "Python"})
    assert (status, body["reason"]) == (400, "language_mismatch")
    assert "runs bash, not python" in body["message"]
    assert 'POST /jupyter-ci/sessions with {"language": "Python"}' in body["message"]
    status, body = await call(jp_fetch, "POST", sid, "execute", body={
        "cells": ["echo ran > ran.txt"], "language": "r"})
    assert (status, body["reason"]) == (400, "language_mismatch")
    # Aliases name a session's language as on creation; the refused runs ran nothing.
    listed = await run(jp_fetch, sid, "ls", language="sh")
    assert listed["status"] == "ok" and "ran.txt" not in stdout(listed)
    assert stdout(await run(jp_fetch, sid, "echo $((6 * 7))", language="BASH")) == "42\n"
