"""Under the default settings no requester chooses to run unboxed (issue 31, point 5).

The attack: an app's user or a prompt-injected agent asks for a session by a kernel or a
language that had no sandboxed kernelspec (Deno, an ordinary kernelspec, `language:
javascript`), through each door (REST, the pool, the Python client, MCP `start_session`),
and reads the server's runtime folder, where its token is. Before, `auto` ran those
sessions unboxed. Now, where bubblewrap works, each is boxed (and reads nothing) or refused
with a 400 naming what would allow it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.client import AsyncClient, CodeInterpreterError
from jupyter_ci.server.sandbox.box import problem
from jupyter_ci.server.sessions.sandbox import _boxes
from tests.fakellm import FakeLLM
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_mcp import http
from tests.test_sessions import Fetch, call, run, stdout

SHARE = Path(sys.prefix) / "share" / "jupyter"
#: What each language runs to look for the server's token in its runtime folder.
READ = {
    "python": ("import os\nseen = False\ntry:\n    for n in os.listdir({d!r}):\n"
               "        try:\n            seen |= {t!r} in open(os.path.join({d!r}, n), "
               "errors='replace').read()\n        except OSError:\n            pass\n"
               "except OSError:\n    pass\nprint('SEEN' if seen else 'UNSEEN')"),
    "bash": "if grep -rqsF -- {t!r} {d!r}; then echo SEEN; else echo UNSEEN; fi",
    "typescript": ("let seen = false;\ntry {{ for (const e of Deno.readDirSync({dj})) {{ try "
                   "{{ if (Deno.readTextFileSync({dj} + '/' + e.name).includes({tj})) seen = "
                   "true; }} catch (_) {{}} }} }} catch (_) {{}}\n"
                   "console.log(seen ? 'SEEN' : 'UNSEEN');"),
    "r": ("seen <- FALSE\nfor (f in list.files({dj}, full.names = TRUE)) {{ t <- tryCatch("
          "paste(readLines(f, warn = FALSE), collapse = ''), error = function(e) '', "
          "warning = function(w) ''); if (grepl({tj}, t, fixed = TRUE)) seen <- TRUE }}\n"
          "cat(if (seen) 'SEEN' else 'UNSEEN', '\\n')"),
}
#: Sessions a client may ask for: every one is boxed or refused.
REQUESTS = [{}, {"kernel_name": "python3"}, {"kernel_name": "deno"},
            {"language": "javascript"}, {"kernel_name": "plain"}, {"language": "bash"},
            {"kernel_name": "ir"}, {"language": "r"}, {"kernel_name": "bash", "env": {"A": "1"}}]


@pytest.fixture
def session_sandbox() -> str | None:
    """c.JupyterCI.session_sandbox of the server; None: the default."""
    return None


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM, tmp_path: Path,
                     session_sandbox: str | None) -> Config:
    """Default settings (the pool too); the installed kernels and an ordinary one."""
    plain = tmp_path / "kernels" / "kernels" / "plain"
    plain.mkdir(parents=True)
    (plain / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Plain Python", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", f"{tmp_path / 'kernels'}:{SHARE}")
    config: Config = session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url})
    del config.JupyterCI["session_pool"]  # the default pool, as shipped
    if session_sandbox is not None:
        config.JupyterCI.session_sandbox = session_sandbox
    return config


@pytest.fixture
def token_file(jp_serverapp: Any) -> tuple[str, str]:
    """The server's runtime folder and its token, written there as a server does."""
    jp_serverapp.write_server_info_file()
    runtime = str(jp_serverapp.runtime_dir)
    token = str(jp_serverapp.identity_provider.token)
    assert any(token in p.read_text() for p in Path(runtime).glob("jpserver-*.json"))
    return runtime, token


async def read_token(jp_fetch: Fetch, session: dict[str, Any], runtime: str, token: str
                     ) -> str:
    """Run the language's read of the runtime folder in the session; SEEN or UNSEEN."""
    code = READ[session["language"]].format(d=runtime, t=token, dj=json.dumps(runtime),
                                            tj=json.dumps(token))
    result = await run(jp_fetch, session["id"], code)
    assert result["status"] == "ok", result
    return stdout(result).strip()


async def test_every_session_a_client_asks_for_is_boxed_or_refused(
    jp_fetch: Fetch, jp_serverapp: Any, token_file: tuple[str, str]
) -> None:
    assert problem() is None, "the test set-up installs bubblewrap"
    specs = jp_serverapp.kernel_spec_manager.get_all_specs()
    refused = []
    for body in REQUESTS:
        status, session = await call(jp_fetch, "POST", body=body)
        if status == 400:
            assert session["reason"] == "sandbox_required", (body, session)
            assert "c.JupyterCI.session_sandbox = 'never'" in session["message"]
            assert "-sandboxed'" in session["message"]
            refused.append(body)
            continue
        assert status == 201, (body, session)
        assert session["sandboxed"] is True, (body, session)
        assert _boxes(specs[session["kernel_name"]]), session
        assert await read_token(jp_fetch, session, *token_file) == "UNSEEN", (body, session)
        await call(jp_fetch, "DELETE", session["id"])
    # An ordinary kernelspec has no sandboxed one here: refused, whoever asks.
    assert {"kernel_name": "plain"} in refused


async def test_the_python_client_and_mcp_get_boxed_or_refused_too(
    jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
    jp_base_url: str, token_file: tuple[str, str],
) -> None:
    url = f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}"
    token = token_file[1]
    async with AsyncClient(url, token) as client:
        with pytest.raises(CodeInterpreterError) as caught:
            await client.session(kernel_name="plain")
        assert (caught.value.status, caught.value.reason) == (400, "sandbox_required")
        assert "session_sandbox = 'never'" in caught.value.message
    async with http(url, token) as mcp:
        result = await mcp.call_tool("start_session", {"kernel_name": "plain"})
        said = " ".join(getattr(part, "text", "") for part in result.content)
        assert result.is_error and "sandbox_required" in said, said
        started = await mcp.call_tool("start_session", {})
        info = json.loads(started.content[0].text)
        assert info["sandboxed"] is True and info["kernel_name"] == "python3-sandboxed"
    listed = jp_serverapp.web_app.settings["jupyter_ci_sessions"].sessions.values()
    assert all(session.sandboxed for session in listed)


@pytest.mark.parametrize("session_sandbox", ["never"])
async def test_never_runs_what_is_asked_for_unboxed_and_says_why(
    jp_fetch: Fetch, token_file: tuple[str, str], session_sandbox: str
) -> None:
    # The control: the read does find the token in an unboxed kernel of each language.
    for body in ({"kernel_name": "plain"}, {"language": "javascript"}, {"language": "bash"},
                 {"kernel_name": "ir"}):
        status, session = await call(jp_fetch, "POST", body=body)
        assert status == 201 and session["sandboxed"] is False, session
        assert session["unboxed_reason"] == "c.JupyterCI.session_sandbox is 'never'"
        assert await read_token(jp_fetch, session, *token_file) == "SEEN", session
        await call(jp_fetch, "DELETE", session["id"])
