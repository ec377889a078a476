"""Ask for an answer again, once, from steps that ran again: one model turn, no tools.

A headless re-run replays an ask's kept steps on this run's data. When their outputs differ
from those the kept answer was written from (other parameters, other data, another
notebook), that answer would describe another run; the model writes a new one from the
steps' code and this run's outputs. It gets no tool, so nothing runs; a tool call it makes
anyway is refused: only its text is the answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from jupyter_ci.agent.budget import trim_middle
from jupyter_ci.agent.loop import Limits
from jupyter_ci.agent.types import Message, ModelReply, ModelRequest

REANSWER_SYSTEM = """\
You are a data analyst working inside the user's Jupyter notebook. The user's request was \
answered before; the code of its steps has just run again, in this run of the notebook, and \
its outputs are this run's. Answer the request from these outputs: concise Markdown, what \
was done and what it shows, with the key numbers. No tools are available: write no new code, \
and do not paste the code again.
"""


def _fenced(text: str, language: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def reanswer_request(prompt: str, steps: Sequence[tuple[str, str]], limits: Limits
                     ) -> ModelRequest:
    """Build the one turn: the request, each step's code and its output text from this run."""
    shown = "\n\n".join(
        f"Step {number}:\n{_fenced(code, 'python')}\nOutput:\n{_fenced(output, '')}"
        for number, (code, output) in enumerate(steps, 1))
    # Within the ask's token limit (about 4 characters a token), leaving room to answer.
    room = max(4 * (limits.max_tokens - limits.max_reply_tokens) - len(prompt), 4_000)
    content = (f"{prompt}\n\n<steps_run_now>\n{trim_middle(shown, room)}\n</steps_run_now>")
    return ModelRequest(system=REANSWER_SYSTEM, messages=(Message("user", content),),
                        tools=(), max_tokens=limits.max_reply_tokens, prompt=prompt)


def reanswer_text(reply: ModelReply) -> str:
    """Return the answer in the reply: its text; a tool call is refused, never run."""
    return reply.text.strip()
