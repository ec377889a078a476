"""MCP tools over the user's own notebooks: which are open with a kernel, and what they hold.

Reading goes through Jupyter's own REST API (`/api/sessions`, `/api/contents`) with the same
client and credentials as the session tools. `run_in_notebook` goes through
`POST /jupyter-ci/notebooks/run` (server/sessions/notebook_run.py): the code runs in the
notebook's kernel only once a JupyterLab page with the labextension shows it as a new cell.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations
from pydantic import Field

from jupyter_ci.client import Execution
from jupyter_ci.client.formats import raise_for
from jupyter_ci.mcp import results
from jupyter_ci.mcp.shapes import (
    Contents,
    JupyterSession,
    Notebook,
    OpenNotebook,
    Output,
    RunInNotebook,
)
from jupyter_ci.mcp.tools import Backend

#: Characters of one output's text given back, and of one cell's source.
OUTPUT_CHARS = 4_000
_IMAGES = ("image/png", "image/jpeg")


def _joined(value: object) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _clipped(value: str, limit: int = OUTPUT_CHARS) -> str:
    if len(value) <= limit:
        return value
    half = limit // 2
    return f"{value[:half]}\n[… {len(value) - limit} characters cut …]\n{value[-half:]}"


def output_text(output: Output) -> str:
    """Return what one nbformat output shows as text (images and HTML noted)."""
    kind = output.get("output_type")
    if kind == "stream":
        return _clipped(_joined(output.get("text")))
    if kind == "error":
        return f"{output.get('ename')}: {output.get('evalue')}"
    data = output.get("data", {})
    if "text/plain" in data:
        return _clipped(_joined(data["text/plain"]))
    return "[" + ", ".join(data) + " output]"


def cells_content(notebook: Notebook) -> list[ContentBlock]:
    """Render a notebook's cells and outputs as text, its images as image content."""
    lines: list[str] = []
    images: list[ContentBlock] = []
    for index, cell in enumerate(notebook.get("cells", [])):
        kind = cell.get("cell_type", "code")
        count = cell.get("execution_count")
        head = f"# cell {index} ({kind}" + (f", [{count}]" if count else "") + ")"
        lines += [head, _clipped(_joined(cell.get("source")), results.MAX_TEXT_CHARS // 10)]
        for output in cell.get("outputs", []):
            lines.append("## output: " + output_text(output))
            for mime in _IMAGES:
                data = output.get("data", {}).get(mime)
                if data and len(images) < results.MAX_IMAGES and \
                        len(str(data)) <= results.MAX_IMAGE_CHARS:
                    images.append(ImageContent(type="image", data=_joined(data).replace(
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
    async def read_notebook(ctx: Context[Any, Any], path: Annotated[
            str, Field(description="The notebook's path, relative to Jupyter's root, as "
                       "list_notebooks gives it.")]) -> CallToolResult:
        """Read a notebook of the user's (as last saved): each cell's source and outputs,
        images as images."""
        response = await backend.client(ctx).http.get(
            f"api/contents/{quote(path.lstrip('/'))}", params={"content": "1"})
        raise_for(response)
        model: Contents = response.json()
        if model.get("type") != "notebook":
            return results.text(f"{path} is a {model.get('type')}, not a notebook.", True)
        return CallToolResult(content=cells_content(model.get("content") or {}))
    _run_tool(server, backend)


def _run_tool(server: MCPServer[Any], backend: Backend) -> None:
    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def run_in_notebook(ctx: Context[Any, Any], path: Annotated[
            str, Field(description="The notebook's path, as list_notebooks gives it.")],
            code: Annotated[str, Field(description="The Python code to run.")],
            timeout: Annotated[float | None, Field(
                description="Seconds before the run is interrupted; omitted: the "
                "server's default.", gt=0)] = None) -> CallToolResult:
        """Run Python code in the kernel of a notebook the user has open in JupyterLab: it
        is added as a new cell at the end of that notebook, with its outputs, so the user
        sees it; outputs come back as text and images. Refused, running nothing, when no
        JupyterLab page has the notebook open or jupyter-ci is not loaded in its kernel."""
        body: RunInNotebook = {"path": path, "code": code}
        if timeout:
            body["timeout"] = timeout
        response = await backend.client(ctx).http.post(
            "jupyter-ci/notebooks/run", json=body, timeout=None)
        if response.status_code >= 400:
            try:
                message = str(response.json().get("message"))
            except ValueError:
                message = f"HTTP {response.status_code}"
            return results.text(message, error=True)
        return results.run_result(Execution.from_json(response.json()),
                                  results.RESTART_NOTEBOOK)
