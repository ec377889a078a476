"""The system prompt and the one tool the model is given."""

from __future__ import annotations

from jupyter_ci.agent.types import ToolSpec

TOOL_NAME = "run_python"

RUN_PYTHON = ToolSpec(
    name=TOOL_NAME,
    description=(
        "Run Python code in the user's live Jupyter kernel and get back its outputs "
        "(stdout, stderr, the value of the last expression, errors with traceback). "
        "Variables, imports and functions persist between calls and stay available to the "
        "user afterwards. Plots and tables are shown to the user."
    ),
    parameters={
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Python source code to run."}
        },
        "required": ["code"],
        "additionalProperties": False,
    },
)

SYSTEM_PROMPT = f"""\
You are a data analyst working inside the user's own Jupyter notebook. You act by calling \
the `{TOOL_NAME}` tool: its code runs in the user's live IPython kernel, the same namespace \
as their own cells, so their variables are there and what you define stays for them. Each \
call becomes a cell of their notebook, so the notebook must remain a clean, re-runnable record.

How to work:
- Take small steps: load, inspect, clean, compute, plot. One purpose per call.
- Use the user's existing variables when they fit; do not reload data they already have.
- Leave results in well-named variables the user can reuse.
- Plots: matplotlib (or what the user already uses); call plt.show() so the figure is shown.
- Tables: end the code with the DataFrame expression to show it; do not print huge data.
- When code fails, read the error and fix the cause in the next call. The fix replaces the \
failed cell, and a failed attempt's code is not kept: make the fix run on its own, defining \
again whatever the failed attempt set that it uses. Earlier steps that succeeded stay as \
cells: build on their variables rather than running them again.
- input() and interactive prompts are unavailable; never call sys.exit() or exit().
- Top-level `await` does not work here (the kernel's event loop is busy running you); use \
synchronous APIs, or `asyncio.run` in a separate thread if you must.
- Do not install packages or touch files outside the working directory unless asked.
- Files you write go in the working directory (the notebook's folder), not /mnt/data; in \
the answer, name them by their path relative to it: the user gets them as links.
- When done, answer in concise Markdown: what you did and what it shows, with key numbers. \
Do not paste the code again in the answer.
"""


#: What wraps the kernel's context in the user turn (disclosure.py cuts it out again).
CONTEXT_OPEN = "<kernel_context>\n"
CONTEXT_CLOSE = "\n</kernel_context>\n\n"


def user_message(prompt: str, context: str) -> str:
    """Build the user turn: the kernel's context, then the request."""
    if not context:
        return prompt
    return f"{CONTEXT_OPEN}{context}{CONTEXT_CLOSE}{prompt}"


EDIT_TOOL = "edit_cell"

EDIT_CELL = ToolSpec(
    name=EDIT_TOOL,
    description=(
        "Propose a new source for an existing code cell of the user's notebook, by the id "
        "the notebook's cells are listed with. The user sees the change as a diff and "
        "accepts or rejects it; it is never applied without them, and it does not run: an "
        "accepted cell runs when the user runs it. Use it to fix or change a cell the user "
        f"wrote (\"fix the cell above\", \"use groupby in cell 3\"); use {TOOL_NAME} for new "
        "work. Give the whole new source, not a diff."
    ),
    parameters={
        "type": "object",
        "properties": {
            "cell_id": {"type": "string", "description": "The id of the cell to change."},
            "source": {"type": "string", "description": "The cell's whole new source."},
        },
        "required": ["cell_id", "source"],
        "additionalProperties": False,
    },
)

#: Added to the system prompt for the first call of a `plan` ask.
PLAN_PROMPT = f"""
Before you run anything, the user approves a plan. In this reply, do not call \
`{TOOL_NAME}`: answer with a short numbered plan only (one line per step: what it does and \
why), nothing else. You carry it out once the user approves it.
"""

#: Heads the user's standing instructions in the system prompt (disclosure.py finds it).
INSTRUCTIONS_HEADING = "## The user's standing instructions"


def system_prompt(instructions: str = "", base: str = SYSTEM_PROMPT) -> str:
    """Return the system prompt with the user's standing instructions, if any, at its end."""
    if not instructions.strip():
        return base
    return (f"{base}\n{INSTRUCTIONS_HEADING}\nFollow these unless the request says "
            f"otherwise:\n\n{instructions.strip()}\n")
