"""What the model is told when the user approves, edits, skips or reviews, in one place."""

from __future__ import annotations

import json
from collections.abc import Sequence

from jupyter_ci.agent.approval import EditDecision, NotebookCell, ProposedEdit
from jupyter_ci.agent.prompts import EDIT_TOOL, TOOL_NAME
from jupyter_ci.agent.types import ToolCall, ToolResult

#: Cells listed for the model at most, and characters of one cell's source shown.
MAX_CELLS = 100
MAX_CELL_CHARS = 4_000


def edit_call(call: ToolCall, cells: Sequence[NotebookCell]) -> ProposedEdit | str:
    """Return the edit an edit_cell call proposes, or a message for the model."""
    usage = f'Call {EDIT_TOOL} with a JSON object {{"cell_id": "<id>", "source": "<code>"}}.'
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"Error: the tool arguments are not valid JSON ({exc.msg}). {usage}"
    if not isinstance(args, dict):
        return f"Error: the arguments must be a JSON object. {usage}"
    cell_id, source = args.get("cell_id"), args.get("source")
    if not isinstance(cell_id, str) or not isinstance(source, str):
        return f"Error: 'cell_id' and 'source' must both be strings. {usage}"
    cell = next((c for c in cells if c.id == cell_id), None)
    if cell is None:
        known = ", ".join(c.id for c in cells[:20]) or "none"
        return f"Error: the notebook has no code cell with id {cell_id!r} (ids: {known})."
    if source == cell.source:
        return "Error: the proposed source is the cell's current source; nothing to change."
    return ProposedEdit(call.id, cell_id, cell.source, source)


def reviewed(edit: ProposedEdit, decision: EditDecision) -> ToolResult:
    """Tell the model what the user decided about its edit."""
    said = {
        "accepted": (f"The user accepted your edit: cell {edit.cell_id} now holds your "
                     "source. It has not run; the user runs it when they choose."),
        "rejected": (f"The user rejected your edit: cell {edit.cell_id} keeps its old "
                     "source. Do not propose the same change again."),
        "proposed": (f"No one can review edits here: your edit of cell {edit.cell_id} was "
                     "not applied; it is listed in your answer for the user."),
    }[decision]
    return ToolResult("ok", said)


def skipped(step: int) -> ToolResult:
    """Tell the model the user skipped its step."""
    return ToolResult("not_run", f"[not run: the user skipped step {step}. Go on without "
                      "it, or answer; do not run the same code again unless asked.]")


def edited_note(code: str) -> str:
    """Tell the model the user edited its code before it ran, and what ran."""
    return ("[The user edited your code before it ran; the outputs above are of this "
            f"code:]\n```python\n{code}\n```")


def plan_approved(plan: str, edited: bool) -> str:
    """The user turn that hands the approved plan back to the model."""
    how = "edited and approved" if edited else "approved"
    return (f"The user {how} this plan:\n\n{plan.strip()}\n\nCarry it out now, step by "
            "step, with the tools; then answer.")


def proposed_section(edits: Sequence[ProposedEdit]) -> str:
    """List edits no one reviewed, as the answer's last section."""
    if not edits:
        return ""
    diffs = "\n\n".join(f"```diff\n{edit.diff()}\n```" for edit in edits)
    return f"\n\n### Proposed edits (not applied)\n\n{diffs}"


def cells_section(cells: Sequence[NotebookCell]) -> str:
    """List the notebook's code cells with their ids, as a section of the kernel context."""
    if not cells:
        return ""
    shown = []
    for cell in cells[:MAX_CELLS]:
        source = cell.source
        if len(source) > MAX_CELL_CHARS:
            source = source[:MAX_CELL_CHARS] + "\n# [… cut: the cell is longer …]"
        error = f"\n(its last run failed: {cell.error})" if cell.error else ""
        shown.append(f"### cell {cell.id}{error}\n```python\n{source}\n```")
    more = (f"\n({len(cells) - MAX_CELLS} more cells not listed)"
            if len(cells) > MAX_CELLS else "")
    return ("\n\n## Notebook cells\nThe notebook's code cells, top to bottom (ask cells "
            f"left out); change one with {EDIT_TOOL} by its id.\n\n" + "\n\n".join(shown)
            + more)


def parse_arguments(call: ToolCall) -> tuple[str, str]:
    """Return (code, "") for a valid run_python call, else ("", a message for the model)."""
    usage = f'Call {TOOL_NAME} with a JSON object {{"code": "<python source>"}}.'
    if call.name != TOOL_NAME:
        return "", f"Error: there is no tool named {call.name!r}. {usage}"
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return "", f"Error: the tool arguments are not valid JSON ({exc.msg}). {usage}"
    code = args.get("code") if isinstance(args, dict) else None
    if not isinstance(code, str) or not code.strip():
        return "", f"Error: the 'code' argument is missing or empty. {usage}"
    return code, ""
