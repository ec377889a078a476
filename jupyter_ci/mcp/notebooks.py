"""MCP tools over the user's own notebooks: which are open, what they hold, and agents' cells.

They go through the server's notebook door (`/jupyter-ci/notebooks/...`,
server/sessions/notebook_handlers.py) with the same client and credentials as the session
tools. With Jupyter's real-time collaboration in the server, cells are read, inserted, edited
and run through the notebook's shared document: no page need be open, an open page shows it
all live, and the file has it after the server's autosave. Changes need the user's consent
(c.JupyterCI.agent_notebooks: by default, notebooks the user opened in JupyterLab, or allowed
one by one); every cell an agent wrote or ran says so in its metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import quote

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations
from pydantic import Field

from jupyter_ci.client import Execution
from jupyter_ci.client.formats import raise_for
from jupyter_ci.mcp import results
from jupyter_ci.mcp.shapes import Contents, JupyterSession, OpenNotebook
from jupyter_ci.mcp.tools import Backend
from jupyter_ci.wire.codec import WireError, decode
from jupyter_ci.wire.notebooks import NotebookCell, NotebookCellChanged, NotebookCells

#: Characters of one output's text given back, and of one cell's source.
OUTPUT_CHARS = 4_000
_IMAGES = ("image/png", "image/jpeg")
_ROUTE = "jupyter-ci/notebooks"
Path = Annotated[str, Field(description="The notebook's path, relative to Jupyter's root, as "
                            "list_notebooks gives it.")]
CellRef = Annotated[int | str, Field(description="The cell: its id as read_notebook gives "
                                     "it, or its index (0 is the first, -1 the last).")]
Timeout = Annotated[float | None, Field(description="Seconds before the run is interrupted; "
                                        "omitted: the server's default.", gt=0)]


def _joined(value: object) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _clipped(value: str, limit: int = OUTPUT_CHARS) -> str:
    if len(value) <= limit:
        return value
    half = limit // 2
    return f"{value[:half]}\n[… {len(value) - limit} characters cut …]\n{value[-half:]}"


def _data(output: Mapping[str, object]) -> Mapping[str, object]:
    data = output.get("data")
    return data if isinstance(data, dict) else {}


def output_text(output: Mapping[str, object]) -> str:
    """Return what one nbformat output shows as text (images and HTML noted)."""
    kind = output.get("output_type")
    if kind == "stream":
        return _clipped(_joined(output.get("text")))
    if kind == "error":
        return f"{output.get('ename')}: {output.get('evalue')}"
    data = _data(output)
    if "text/plain" in data:
        return _clipped(_joined(data["text/plain"]))
    return "[" + ", ".join(data) + " output]"


def _head(index: int, cell: NotebookCell) -> str:
    """Name one cell: its index, id, kind, count, and who wrote or ran it."""
    count = f", [{cell.execution_count}]" if cell.execution_count else ""
    who = "".join(f", {what} {by}" for what, by in (("written by", cell.external),
                                                    ("run by", cell.ran_by)) if by)
    return f"# cell {index} ({cell.cell_type}{count}, id {cell.id}{who})"


def cells_content(cells: tuple[NotebookCell, ...]) -> list[ContentBlock]:
    """Render a notebook's cells and outputs as text, its images as image content."""
    lines: list[str] = []
    images: list[ContentBlock] = []
    for index, cell in enumerate(cells):
        lines += [_head(index, cell), _clipped(cell.source, results.MAX_TEXT_CHARS // 10)]
        for output in cell.outputs:
            shown: Mapping[str, object] = output
            lines.append("## output: " + output_text(shown))
            for mime in _IMAGES:
                image = _data(shown).get(mime)
                if image and len(images) < results.MAX_IMAGES and \
                        len(str(image)) <= results.MAX_IMAGE_CHARS:
                    images.append(ImageContent(type="image", data=_joined(image).replace(
                        "\n", ""), mime_type=mime))
    text = "\n".join(lines)[:results.MAX_TEXT_CHARS] or "(an empty notebook)"
    return [TextContent(type="text", text=text), *images]


def _open_notebook(session: JupyterSession) -> OpenNotebook:
    kernel = session.get("kernel") or {}
    return {"path": session.get("path"), "name": session.get("name"),
            "type": session.get("type"),
            "kernel": {"id": kernel.get("id"), "name": kernel.get("name"),
                       "execution_state": kernel.get("execution_state"),
                       "last_activity": kernel.get("last_activity")}}


async def _call(backend: Backend, ctx: Context[Any, Any], method: str, route: str,
                body: dict[str, object]) -> tuple[bool, Any]:
    """Call a notebook-door route; return (ok, its JSON or the server's message)."""
    response = await backend.client(ctx).http.request(
        method, f"{_ROUTE}/{route}", json=body, timeout=None)
    try:
        value = response.json()
    except ValueError:
        value = {"message": f"HTTP {response.status_code}"}
    if response.status_code >= 400:
        return False, str(value.get("message") if isinstance(value, dict) else value)
    return True, value


def _changed(ok: bool, value: Any, what: str) -> CallToolResult:
    if not ok:
        return results.text(str(value), error=True)
    try:
        cell = decode(NotebookCellChanged, value, lenient=True)
    except WireError as exc:
        return results.text(f"The server's answer did not read: {exc}", error=True)
    return results.text(f"{what} cell {cell.index} (id {cell.id}) of {cell.path}.")


def notebook_tools(server: MCPServer[Any], backend: Backend) -> None:
    """Add the tools over the user's own notebooks."""

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def list_notebooks(ctx: Context[Any, Any]) -> list[OpenNotebook]:
        """List the notebooks open in Jupyter with a running kernel (path, kernel name,
        kernel state)."""
        response = await backend.client(ctx).http.get("api/sessions")
        raise_for(response)
        sessions: list[JupyterSession] = response.json()
        return [_open_notebook(s) for s in sessions]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def read_notebook(ctx: Context[Any, Any], path: Path) -> CallToolResult:
        """Read a notebook of the user's as it is now (with the changes open pages have not
        saved yet): each cell's index, id, source and outputs, images as images."""
        response = await backend.client(ctx).http.get(f"{_ROUTE}/cells",
                                                      params={"path": path})
        if response.status_code == 404 and response.json().get("reason") == "no_such_notebook":
            return await _read_other(backend, ctx, path, response.json().get("message"))
        raise_for(response)
        found = decode(NotebookCells, response.json(), lenient=True)
        return CallToolResult(content=cells_content(found.cells))
    _change_tools(server, backend)
    _run_tools(server, backend)


async def _read_other(backend: Backend, ctx: Context[Any, Any], path: str, said: object
                      ) -> CallToolResult:
    """Say what a path that is not a notebook is (a folder, a file), else the server's words."""
    response = await backend.client(ctx).http.get(
        f"api/contents/{quote(path.lstrip('/'))}", params={"content": "0"})
    if response.status_code < 400:
        model: Contents = response.json()
        return results.text(f"{path} is a {model.get('type')}, not a notebook.", True)
    return results.text(str(said), True)


def _change_tools(server: MCPServer[Any], backend: Backend) -> None:
    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def insert_cell(ctx: Context[Any, Any], path: Path, source: Annotated[
            str, Field(description="The cell's source.")], index: Annotated[
            int | None, Field(description="Where it goes (0: first); omitted: at the end.")
            ] = None, cell_type: Literal["code", "markdown"] = "code") -> CallToolResult:
        """Insert a cell into a notebook of the user's, without running it; an open page
        shows it at once, and the file has it after the server's autosave. Refused when the
        user has not let agents change that notebook."""
        body: dict[str, object] = {"path": path, "source": source, "cell_type": cell_type}
        if index is not None:
            body["index"] = index
        return _changed(*await _call(backend, ctx, "POST", "cells", body), "Inserted")

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def edit_cell(ctx: Context[Any, Any], path: Path, cell: CellRef, source: Annotated[
            str, Field(description="The cell's new source (replaces it whole).")]
            ) -> CallToolResult:
        """Replace the source of a cell of a notebook of the user's, without running it;
        the cell is marked as written by an agent. Refused when the user has not let agents
        change that notebook."""
        return _changed(*await _call(backend, ctx, "PATCH", "cells", {
            "path": path, "cell": cell, "source": source}), "Edited")


def _run_tools(server: MCPServer[Any], backend: Backend) -> None:
    async def run(ctx: Context[Any, Any], body: dict[str, object], timeout: float | None
                  ) -> CallToolResult:
        if timeout:
            body["timeout"] = timeout
        ok, value = await _call(backend, ctx, "POST", "run", body)
        if not ok:
            return results.text(str(value), error=True)
        result = results.run_result(Execution.from_json(value), results.RESTART_NOTEBOOK)
        where = f"(cell {value.get('index')}, id {value.get('cell_id')}, of {value.get('path')})"
        result.content.insert(0, TextContent(type="text", text=where))
        return result

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def run_in_notebook(ctx: Context[Any, Any], path: Path, code: Annotated[
            str, Field(description="The Python code to run.")], timeout: Timeout = None
            ) -> CallToolResult:
        """Run code in the kernel of a notebook of the user's (started if none runs) as a
        new cell at its end, with its outputs, so the user sees it; outputs come back as text
        and images. An open page shows it live and its user can stop it. Refused, running
        nothing, when the user has not let agents change that notebook."""
        return await run(ctx, {"path": path, "code": code}, timeout)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def run_cell(ctx: Context[Any, Any], path: Path, cell: CellRef,
                       timeout: Timeout = None) -> CallToolResult:
        """Run a code cell of a notebook of the user's as it is, in the notebook's kernel;
        its outputs replace the cell's and come back as text and images. Refused, running
        nothing, when the user has not let agents change that notebook."""
        return await run(ctx, {"path": path, "cell": cell}, timeout)
