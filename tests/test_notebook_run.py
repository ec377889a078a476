"""run_in_notebook refuses, running nothing, whatever could make it run code unseen: no
kernel for the notebook, a kernel without jupyter-ci's extension, no page that shows the cell,
and (in the kernel itself) a request whose cell no page acknowledged. The browser test that
sees the cell is tests/ui/test_notebook_run.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from traitlets.config import Config

from jupyter_ci.server.sessions.notebook_clients import NotebookClients
from jupyter_ci.server.sessions.notebook_run import ACK_S, EXTERNAL_KEY, run_in_notebook
from tests.fakepage import FakePage
from tests.nbrun import session_server_config
from tests.test_mcp import TRANSPORTS, texts

#: The code the MCP client sends: it leaves a file behind if it ever runs.
MARKER = "open('ran.txt', 'w').write('ran')\nprint('ran')"


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    return session_server_config(monkeypatch, {})


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}",
            str(jp_serverapp.identity_provider.token))


async def open_notebook(jp_fetch: Any, root: Path) -> str:
    """Start a kernel for work/nb.ipynb through Jupyter's sessions, as JupyterLab does."""
    (root / "work").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), root / "work" / "nb.ipynb")
    started = await jp_fetch("api", "sessions", method="POST", body=json.dumps({
        "path": "work/nb.ipynb", "name": "nb.ipynb", "type": "notebook",
        "kernel": {"name": "python3"}}))
    return str(json.loads(started.body)["kernel"]["id"])


async def execute(serverapp: Any, kernel_id: str, code: str,
                  metadata: dict[str, Any] | None = None, msg_id: str = ""
                  ) -> dict[str, Any]:
    """Run code in the kernel as another client would (under `msg_id`, if given); return its
    reply's content."""
    client = serverapp.kernel_manager.get_kernel(kernel_id).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        request = client.session.msg("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True}, metadata=metadata or {})
        request["header"]["msg_id"] = msg_id = msg_id or request["header"]["msg_id"]
        client.shell_channel.send(request)
        while True:
            reply = await client.get_shell_msg(timeout=60)
            if reply["parent_header"].get("msg_id") == msg_id:
                return dict(reply["content"])
    finally:
        client.stop_channels()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_kernel_without_the_extension_is_refused_and_nothing_runs(
    server: tuple[str, str], transport: str, jp_root_dir: Path, jp_fetch: Any
) -> None:
    await open_notebook(jp_fetch, jp_root_dir)
    async with TRANSPORTS[transport](*server) as mcp:
        result = await mcp.call_tool("run_in_notebook", {"path": "work/nb.ipynb",
                                                         "code": MARKER})
    assert result.is_error
    assert "%load_ext jupyter_ci" in texts(result) and "nothing ran" in texts(result)
    assert not (jp_root_dir / "work" / "ran.txt").exists()


async def test_no_page_showing_the_notebook_is_refused_and_nothing_runs(
    server: tuple[str, str], jp_root_dir: Path, jp_fetch: Any, jp_serverapp: Any
) -> None:
    kernel_id = await open_notebook(jp_fetch, jp_root_dir)
    assert (await execute(jp_serverapp, kernel_id, "%load_ext jupyter_ci"))["status"] == "ok"
    async with TRANSPORTS["http"](*server) as mcp:
        result = await mcp.call_tool("run_in_notebook", {"path": "/work/nb.ipynb",
                                                         "code": MARKER})
    assert result.is_error
    assert "open the notebook in JupyterLab first" in texts(result), texts(result)
    assert not (jp_root_dir / "work" / "ran.txt").exists()
    assert ACK_S <= 5  # the caller is not kept waiting long


async def test_the_kernel_runs_no_external_request_whose_cell_no_page_acknowledged(
    jp_root_dir: Path, jp_fetch: Any, jp_serverapp: Any
) -> None:
    kernel_id = await open_notebook(jp_fetch, jp_root_dir)
    await execute(jp_serverapp, kernel_id, "%load_ext jupyter_ci")
    reply = await execute(jp_serverapp, kernel_id, MARKER,
                          {EXTERNAL_KEY: {"id": "never-announced", "source": "mcp"}})
    assert reply["status"] == "error" and "refused" in reply["evalue"]
    assert not (jp_root_dir / "work" / "ran.txt").exists()
    # Without that metadata the same code is the user's own: it runs.
    assert (await execute(jp_serverapp, kernel_id, MARKER))["status"] == "ok"
    assert (jp_root_dir / "work" / "ran.txt").exists()


async def test_a_notebook_without_a_kernel_is_not_found(jp_fetch: Any) -> None:
    from tornado.httpclient import HTTPClientError

    with pytest.raises(HTTPClientError) as error:
        await jp_fetch("jupyter-ci", "notebooks", "run", method="POST", body=json.dumps(
            {"path": "nowhere.ipynb", "code": "1"}))
    assert error.value.code == 404
    assert "open it in JupyterLab" in json.loads(error.value.response.body)["message"]


async def test_every_run_in_one_kernel_fills_its_own_cell_in_the_saved_file(
    server: tuple[str, str], jp_root_dir: Path, jp_fetch: Any, jp_serverapp: Any
) -> None:
    kernel_id = await open_notebook(jp_fetch, jp_root_dir)
    await execute(jp_serverapp, kernel_id, "%load_ext jupyter_ci")
    codes = [f"print('cell {n}')\n{n} * 7" for n in range(4)]
    kernels = jp_serverapp.kernel_manager
    async with FakePage(kernels.get_kernel(kernel_id).client(), "work/nb.ipynb") as page:
        async with TRANSPORTS["http"](*server) as mcp:
            clients = set()
            for code in codes:
                result = await mcp.call_tool("run_in_notebook", {"path": "work/nb.ipynb",
                                                                 "code": code})
                assert not result.is_error, texts(result)
                clients.add(NotebookClients.of(kernels)._kept[kernel_id].client)
        await page.settled(len(codes))
        await jp_fetch("api", "contents", "work", "nb.ipynb", method="PUT", body=json.dumps(
            {"type": "notebook", "format": "json", "content": page.notebook}))
    saved = nbformat.read(jp_root_dir / "work" / "nb.ipynb", as_version=4)
    assert [c.source for c in saved.cells] == codes
    counts = [c.execution_count for c in saved.cells]
    assert all(isinstance(n, int) for n in counts) and counts == sorted(set(counts)), counts
    for n, (cell, count) in enumerate(zip(saved.cells, counts, strict=True)):
        assert cell.metadata["jupyter_ci"] == {"external": "mcp"}
        assert [(o.output_type, o.get("text") or o.get("data", {}).get("text/plain"))
                for o in cell.outputs] == [("stream", f"cell {n}\n"),
                                           ("execute_result", str(n * 7))], (n, cell.outputs)
        assert cell.outputs[1].execution_count == count
    # One client served every call; it closes when the kernel goes.
    (client,) = clients
    assert client.channels_running
    await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    assert not client.channels_running and len(NotebookClients.of(kernels)) == 0


async def test_a_request_reusing_the_id_of_one_let_through_is_still_gated(
    jp_root_dir: Path, jp_fetch: Any, jp_serverapp: Any
) -> None:
    kernel_id = await open_notebook(jp_fetch, jp_root_dir)
    await execute(jp_serverapp, kernel_id, "%load_ext jupyter_ci")
    kernels = jp_serverapp.kernel_manager
    async with FakePage(kernels.get_kernel(kernel_id).client(), "work/nb.ipynb") as page:
        await run_in_notebook(kernels, kernel_id, "work/nb.ipynb", "1 + 1", 60)
        await page.settled(1)
        (let_through,) = page.run_ids
    # Another cell's request under that id (as a client numbering from the same start
    # sends): no page was shown it, so it must not run.
    reply = await execute(jp_serverapp, kernel_id, MARKER, {EXTERNAL_KEY: {
        "id": "never-announced", "source": "mcp"}}, msg_id=let_through)
    assert reply["status"] == "error" and "refused" in reply["evalue"]
    assert not (jp_root_dir / "work" / "ran.txt").exists()
