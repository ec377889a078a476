"""The notebook door with Jupyter's collaboration model: agents insert, edit and run cells in
the user's notebooks through the server's shared document, with no page open, only where the
user consented; their cells are marked, in the file after the autosave, their kernel marked
as having run model code. The browser side (a page showing it live, its stop button) is
tests/ui/test_notebook_door.py."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

from jupyter_ci.server.sessions.notebook_consent import ALLOW_COMMAND, Consent
from tests.nbrun import session_server_config

#: Code that leaves a file behind if it ever runs.
MARKER = "open('ran.txt', 'w').write('ran')\nprint('ran')"
#: Seconds at most for the server's autosave (a hang guard, not a timing assertion).
SAVED_S = 30.0


def collaboration_config(monkeypatch: pytest.MonkeyPatch, **ci: object) -> Config:
    """The extension with Jupyter's real-time collaboration (and its file ids) loaded."""
    config = session_server_config(monkeypatch, {})
    config.ServerApp.jpserver_extensions.update(
        {"jupyter_server_ydoc": True, "jupyter_server_fileid": True})
    config.JupyterCI.update(ci)
    return config


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Config:
    return collaboration_config(monkeypatch,
                                agent_notebooks_file=str(tmp_path / "consent.json"))


def notebook(root: Path, name: str = "nb.ipynb", cells: tuple[str, ...] = ("x = 41",)) -> Path:
    """Write a notebook of code cells under root/work; return its path."""
    (root / "work").mkdir(exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = root / "work" / name
    nbformat.write(nb, path)
    return path


async def call(jp_fetch: Any, method: str, route: str, body: dict[str, Any] | None = None,
               **params: str) -> Any:
    """Call a notebook-door route; return its JSON (None for 204)."""
    reply = await jp_fetch("jupyter-ci", "notebooks", route, method=method, params=params,
                           body=None if body is None else json.dumps(body))
    return json.loads(reply.body) if reply.body else None


async def refused(jp_fetch: Any, method: str, route: str, body: dict[str, Any] | None = None,
                  **params: str) -> tuple[int, dict[str, Any]]:
    """Call a route that must refuse; return its status and JSON."""
    with pytest.raises(HTTPClientError) as error:
        await call(jp_fetch, method, route, body, **params)
    assert error.value.response is not None
    return error.value.code, json.loads(error.value.response.body)


async def saved(path: Path, check: Any) -> Any:
    """Wait for the server's autosave to write a notebook that passes `check`; return it."""
    deadline = time.monotonic() + SAVED_S
    while True:
        try:
            nb = nbformat.read(path, as_version=4)
        except nbformat.reader.NotJSONError:  # caught mid-write: the save writes in place
            await asyncio.sleep(0.1)
            continue
        if check(nb) or time.monotonic() > deadline:
            assert check(nb), nb
            return nb
        await asyncio.sleep(0.2)


async def opened(jp_fetch: Any, path: str = "work/nb.ipynb") -> None:
    """Do what a page does when the user opens the notebook."""
    assert await call(jp_fetch, "POST", "opened", {"path": path}) is None


async def test_an_agent_runs_a_new_cell_in_a_notebook_no_page_has_open(
    jp_fetch: Any, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    path = notebook(jp_root_dir)
    await opened(jp_fetch)
    assert not await jp_serverapp.session_manager.list_sessions()  # no kernel yet
    result = await call(jp_fetch, "POST", "run", {"path": "work/nb.ipynb",
                                                  "code": "y = 1 + 1\nprint('two', y)\ny"})
    assert result["status"] == "ok" and result["index"] == 1 and result["path"] == "work/nb.ipynb"
    assert [o.get("text") for o in result["outputs"] if o["output_type"] == "stream"] == ["two 2\n"]
    # The notebook's kernel, started as opening it would: the page that opens it later joins.
    sessions = await jp_serverapp.session_manager.list_sessions()
    assert [s["kernel"]["id"] for s in sessions if s["path"] == "work/nb.ipynb"] == [
        result["kernel_id"]]
    nb = await saved(path, lambda nb: len(nb.cells) == 2 and nb.cells[1].outputs)
    cell = nb.cells[1]
    assert cell.source == "y = 1 + 1\nprint('two', y)\ny" and cell.id == result["cell_id"]
    assert cell.metadata["jupyter_ci"] == {"external": "mcp", "ran_by": "mcp"}
    assert "trusted" not in cell.metadata
    assert cell.execution_count == result["execution_count"] is not None
    assert [o.output_type for o in cell.outputs] == ["stream", "execute_result"]
    assert cell.outputs[1].data["text/plain"] == "2"
    assert nb.cells[0].source == "x = 41"  # the user's own cell untouched
    # Its kernel ran an agent's code: no page renders its outputs as trusted (model_code.py).
    marks = await jp_fetch("jupyter-ci", "kernels", result["kernel_id"], "model-code")
    assert json.loads(marks.body)["model_code"] is True


async def test_insert_edit_read_and_run_a_cell_by_id_and_by_index(
    jp_fetch: Any, jp_root_dir: Path
) -> None:
    path = notebook(jp_root_dir, cells=("a = 1", "print('user', a)"))
    await opened(jp_fetch)
    inserted = await call(jp_fetch, "POST", "cells", {"path": "work/nb.ipynb", "index": 1,
                                                      "source": "a = a + 10"})
    assert inserted["index"] == 1
    read = await call(jp_fetch, "GET", "cells", path="work/nb.ipynb")
    assert read["live"] is True
    assert [c["source"] for c in read["cells"]] == ["a = 1", "a = a + 10", "print('user', a)"]
    assert read["cells"][1]["external"] == "mcp" and read["cells"][0]["external"] is None
    for cell in (0, inserted["id"]):
        assert (await call(jp_fetch, "POST", "run", {"path": "work/nb.ipynb", "cell": cell})
                )["status"] == "ok"
    # The user's own cell, run by the agent: marked as run by it, its code still the user's.
    last = await call(jp_fetch, "POST", "run", {"path": "work/nb.ipynb", "cell": -1})
    assert last["outputs"][0]["text"] == "user 11\n"
    edited = await call(jp_fetch, "PATCH", "cells", {"path": "work/nb.ipynb",
                                                     "cell": inserted["id"], "source": "a = 0"})
    assert edited == {"path": "work/nb.ipynb", "index": 1, "id": inserted["id"]}
    nb = await saved(path, lambda nb: nb.cells[1].source == "a = 0" and nb.cells[2].outputs)
    assert nb.cells[2].metadata["jupyter_ci"] == {"ran_by": "mcp"}
    assert nb.cells[2].outputs[0].text == "user 11\n"
    assert nb.cells[1].metadata["jupyter_ci"]["external"] == "mcp"


async def test_a_notebook_the_user_never_opened_or_allowed_is_refused_unchanged(
    jp_fetch: Any, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    path = notebook(jp_root_dir)
    before = path.read_bytes()
    for method, route, body in (
            ("POST", "run", {"path": "work/nb.ipynb", "code": MARKER}),
            ("POST", "run", {"path": "work/nb.ipynb", "cell": 0}),
            ("POST", "cells", {"path": "work/nb.ipynb", "source": MARKER}),
            ("PATCH", "cells", {"path": "work/nb.ipynb", "cell": 0, "source": MARKER})):
        status, reply = await refused(jp_fetch, method, route, body)
        assert (status, reply["reason"]) == (403, "agents_not_allowed"), reply
        assert ALLOW_COMMAND in reply["message"] and "nothing changed" in reply["message"]
    assert not (jp_root_dir / "work" / "ran.txt").exists()
    assert not await jp_serverapp.session_manager.list_sessions()  # no kernel started
    await asyncio.sleep(1.5)  # past the autosave delay: nothing was changed to save
    assert path.read_bytes() == before
    # Reading is not limited.
    assert len((await call(jp_fetch, "GET", "cells", path="work/nb.ipynb"))["cells"]) == 1


async def test_the_users_allow_lasts_and_can_be_taken_back(
    jp_fetch: Any, jp_root_dir: Path, tmp_path: Path
) -> None:
    notebook(jp_root_dir)
    state = await call(jp_fetch, "GET", "consent", path="work/nb.ipynb")
    assert state == {"path": "work/nb.ipynb", "allowed": False, "why": "not_opened",
                     "setting": "opened"}
    state = await call(jp_fetch, "PUT", "consent", {"path": "work/nb.ipynb", "allow": True})
    assert (state["allowed"], state["why"]) == (True, "allowed")
    assert (await call(jp_fetch, "POST", "cells", {"path": "work/nb.ipynb", "source": "1"})
            )["index"] == 1
    kept = tmp_path / "consent.json"
    assert kept.stat().st_mode & 0o777 == 0o600
    # A server started later reads the same file: the notebook is still allowed.
    assert Consent("opened", kept).why("work/nb.ipynb") == (True, "allowed")
    await opened(jp_fetch)
    state = await call(jp_fetch, "PUT", "consent", {"path": "work/nb.ipynb", "allow": False})
    assert (state["allowed"], state["why"]) == (False, "not_opened")  # the opening's too
    status, _reply = await refused(jp_fetch, "POST", "cells", {"path": "work/nb.ipynb",
                                                              "source": "2"})
    assert status == 403


@pytest.mark.parametrize("setting", ["never", "allowed"])
async def test_stricter_settings_refuse_a_notebook_the_user_opened(
    jp_fetch: Any, jp_root_dir: Path, jp_serverapp: Any, setting: str
) -> None:
    notebook(jp_root_dir)
    jp_serverapp.web_app.settings["jupyter_ci"].agent_notebooks = setting
    await opened(jp_fetch)
    status, reply = await refused(jp_fetch, "POST", "run", {"path": "work/nb.ipynb",
                                                            "code": MARKER})
    assert status == 403 and setting in reply["message"]
    assert not (jp_root_dir / "work" / "ran.txt").exists()


@pytest.mark.parametrize(("path", "reason"), [
    ("../outside.ipynb", "no_such_notebook"), ("work/.hidden.ipynb", "no_such_notebook"),
    ("work/notes.txt", "no_such_notebook"), ("work/missing.ipynb", "no_such_notebook")])
async def test_paths_outside_hidden_or_not_notebooks_are_refused(
    jp_fetch: Any, jp_root_dir: Path, path: str, reason: str
) -> None:
    notebook(jp_root_dir)
    notebook(jp_root_dir, ".hidden.ipynb")
    (jp_root_dir / "work" / "notes.txt").write_text("not a notebook")
    (jp_root_dir.parent / "outside.ipynb").write_text(
        (jp_root_dir / "work" / "nb.ipynb").read_text())
    for method, route, body in (("PUT", "consent", {"path": path, "allow": True}),
                                ("POST", "opened", {"path": path})):
        status, reply = await refused(jp_fetch, method, route, body)
        assert (status, reply["reason"]) == (404, reason), reply
    status, reply = await refused(jp_fetch, "GET", "cells", path=path)
    assert (status, reply["reason"]) == (404, reason)


@pytest.mark.parametrize(("body", "words"), [
    ({"path": "work/nb.ipynb"}, "exactly one of 'code'"),
    ({"path": "work/nb.ipynb", "code": "1", "cell": 0}, "exactly one of 'code'"),
    ({"path": "work/nb.ipynb", "code": "1", "kernel_name": "bash"}, "Unknown field"),
    ({"path": "work/nb.ipynb", "cell": 0, "timeout": -1}, "'timeout' must be"),
    ({"path": "", "code": "1"}, "'path'"),
    ({"path": "work/nb.ipynb", "cell": 1.5}, "cell"),
])
async def test_malformed_runs_are_refused_saying_why(
    jp_fetch: Any, jp_root_dir: Path, body: dict[str, Any], words: str
) -> None:
    notebook(jp_root_dir)
    await opened(jp_fetch)
    status, reply = await refused(jp_fetch, "POST", "run", body)
    assert status == 400 and words in reply["message"], reply


async def test_a_run_waits_for_the_users_running_cell_and_a_timeout_stops_only_the_agents(
    jp_fetch: Any, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    notebook(jp_root_dir, cells=("import time; time.sleep(3); user_done = True",))
    await opened(jp_fetch)
    kernel = (await call(jp_fetch, "POST", "run", {"path": "work/nb.ipynb",
                                                   "code": "kept = 5"}))["kernel_id"]
    # The user's own long cell, sent as a page sends it, then an agent's run with a short
    # timeout: the timeout counts from when the kernel is free, so the user's cell is not
    # the one interrupted.
    client = jp_serverapp.kernel_manager.get_kernel(kernel).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        users = client.execute("import time; time.sleep(3); user_done = True")
        agent = call(jp_fetch, "POST", "run", {"path": "work/nb.ipynb", "timeout": 1,
                                               "code": "time.sleep(30)"})
        result = await agent
        while True:
            reply = await client.get_shell_msg(timeout=60)
            if reply["parent_header"].get("msg_id") == users:
                break
        assert reply["content"]["status"] == "ok"
    finally:
        client.stop_channels()
    assert result["status"] == "timeout"
    after = await call(jp_fetch, "POST", "run", {"path": "work/nb.ipynb",
                                                 "code": "print(user_done, kept)"})
    assert after["outputs"][0]["text"] == "True 5\n"  # the user's state is intact


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}",
            str(jp_serverapp.identity_provider.token))


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_mcp_client_inserts_edits_runs_and_reads_cells_with_no_page(
    server: tuple[str, str], transport: str, jp_fetch: Any, jp_root_dir: Path
) -> None:
    from tests.test_mcp import TRANSPORTS, texts

    path = notebook(jp_root_dir, cells=("base = 20",))
    await opened(jp_fetch)
    async with TRANSPORTS[transport](*server) as mcp:
        ran = await mcp.call_tool("run_in_notebook", {"path": "work/nb.ipynb",
                                                      "code": "print('sum', base + 1)"})
        assert ran.is_error and "NameError" in texts(ran)  # the user's cell never ran
        assert (await mcp.call_tool("run_cell", {"path": "work/nb.ipynb", "cell": 0})
                ).is_error is False
        again = await mcp.call_tool("run_cell", {"path": "work/nb.ipynb", "cell": 1})
        assert "sum 21" in texts(again) and "cell 1" in texts(again)
        inserted = await mcp.call_tool("insert_cell", {"path": "work/nb.ipynb",
                                                       "source": "## Notes",
                                                       "cell_type": "markdown"})
        assert "Inserted cell 2" in texts(inserted)
        edited = await mcp.call_tool("edit_cell", {"path": "work/nb.ipynb", "cell": 1,
                                                   "source": "print('edited')"})
        assert "Edited cell 1" in texts(edited)
        read = texts(await mcp.call_tool("read_notebook", {"path": "work/nb.ipynb"}))
        missing = await mcp.call_tool("run_cell", {"path": "work/nb.ipynb", "cell": 9})
        markdown = await mcp.call_tool("run_cell", {"path": "work/nb.ipynb", "cell": 2})
    assert "written by mcp, run by mcp)\nprint('edited')" in read and "## output: sum 21" in read
    assert "(markdown, id" in read and "run by mcp)\nbase = 20" in read
    assert missing.is_error and "there is no cell 9" in texts(missing)
    assert markdown.is_error and "only code cells run" in texts(markdown)
    nb = await saved(path, lambda nb: len(nb.cells) == 3 and nb.cells[1].source ==
                     "print('edited')")
    assert nb.cells[2].cell_type == "markdown"


async def test_an_mcp_client_is_told_how_to_get_consent(
    server: tuple[str, str], jp_root_dir: Path
) -> None:
    from tests.test_mcp import TRANSPORTS, texts

    notebook(jp_root_dir)
    async with TRANSPORTS["http"](*server) as mcp:
        result = await mcp.call_tool("run_in_notebook", {"path": "work/nb.ipynb",
                                                         "code": MARKER})
    assert result.is_error and ALLOW_COMMAND in texts(result)
    assert not (jp_root_dir / "work" / "ran.txt").exists()


async def test_a_cell_named_by_index_is_the_one_run_even_if_cells_move_while_the_kernel_is_busy(
    jp_fetch: Any, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    notebook(jp_root_dir, cells=("print('A')", "print('B')"))
    await opened(jp_fetch)
    kernel = (await call(jp_fetch, "POST", "run", {"path": "work/nb.ipynb", "cell": 0})
              )["kernel_id"]
    client = jp_serverapp.kernel_manager.get_kernel(kernel).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        client.execute("import time; time.sleep(2)")  # the user's cell keeps it busy
        run = asyncio.ensure_future(call(jp_fetch, "POST", "run", {"path": "work/nb.ipynb",
                                                                   "cell": 1}))
        await asyncio.sleep(0.5)
        assert not run.done()
        # Meanwhile a cell goes in above: the cell that was at index 1 is at 2 now.
        await call(jp_fetch, "POST", "cells", {"path": "work/nb.ipynb", "index": 0,
                                               "source": "print('new')"})
        result = await run
    finally:
        client.stop_channels()
    assert result["outputs"][0]["text"] == "B\n" and result["index"] == 2
