"""The MCP tools over the user's own notebooks: list those open with a kernel, read one."""

from __future__ import annotations

import base64
import json
from typing import Any

import nbformat
import pytest
from mcp.types import ImageContent
from traitlets.config import Config

from tests.nbrun import session_server_config
from tests.test_mcp import TRANSPORTS, texts

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 16).decode()


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    return session_server_config(monkeypatch, {})


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}",
            str(jp_serverapp.identity_provider.token))


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_open_notebooks_are_listed_and_read_with_their_outputs(
    server: tuple[str, str], transport: str, jp_root_dir: Any, jp_fetch: Any
) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Sales"),
                nbformat.v4.new_code_cell("print('hi')\n6 * 7", execution_count=3, outputs=[
                    nbformat.v4.new_output("stream", name="stdout", text="hi\n"),
                    nbformat.v4.new_output("execute_result", {"text/plain": "42"},
                                           execution_count=3)]),
                nbformat.v4.new_code_cell("plot()", outputs=[nbformat.v4.new_output(
                    "display_data", {"image/png": PNG, "text/plain": "<Figure>"})])]
    (jp_root_dir / "work").mkdir()
    nbformat.write(nb, jp_root_dir / "work" / "sales.ipynb")
    started = await jp_fetch("api", "sessions", method="POST", body=json.dumps({
        "path": "work/sales.ipynb", "name": "sales.ipynb", "type": "notebook",
        "kernel": {"name": "python3"}}))
    kernel_id = json.loads(started.body)["kernel"]["id"]
    url, token = server
    async with TRANSPORTS[transport](url, token) as mcp:
        listed = (await mcp.call_tool("list_notebooks", {})).structured_content["result"]
        read = await mcp.call_tool("read_notebook", {"path": "work/sales.ipynb"})
        folder = await mcp.call_tool("read_notebook", {"path": "work"})
    assert [(n["path"], n["kernel"]["id"], n["kernel"]["name"]) for n in listed] == [
        ("work/sales.ipynb", kernel_id, "python3")]
    text = texts(read)
    ids = [cell.id for cell in nbformat.read(jp_root_dir / "work" / "sales.ipynb", 4).cells]
    assert f"# cell 1 (code, [3], id {ids[1]})\nprint('hi')\n6 * 7" in text
    assert "## output: hi" in text and "## output: 42" in text and "# Sales" in text
    images = [c for c in read.content if isinstance(c, ImageContent)]
    assert [(i.mime_type, i.data) for i in images] == [("image/png", PNG)]
    assert folder.is_error and "not a notebook" in texts(folder)
