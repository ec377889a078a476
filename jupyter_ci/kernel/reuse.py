"""Re-running an answered ask: its recorded answer reused, or its pin trusted headless.

The notebook's ask record (kernel/record.py) says what was answered; reused, the answer is
shown again and the generated cells below run as recorded, without a model call. Headless
runners send only the cell's source: then the record is read from the notebook on disk, and
with none at hand a `--pin` that matches the prompt stands for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from jupyter_ci.agent.memory import Memory
from jupyter_ci.kernel.options import AskOptions
from jupyter_ci.kernel.protocol import RequestInfo
from jupyter_ci.kernel.record import (
    Reuse,
    pin_of,
    reusable_from_request,
    reusable_on_disk,
    would_fail,
)
from jupyter_ci.kernel.views import show_markdown

#: What memory keeps of an ask whose recorded answer was reused instead of asking the model.
REUSED_SUMMARY = ("(Not asked this time: the notebook already held a recorded answer, shown to "
                  "the user, and its generated cells ran as recorded.)")
# Headless runners send only the source: the pin in it is all the kernel knows of the ask.
PINNED_NOTE = ("*Not asked again: this ask was answered in JupyterLab (`--pin`), and the "
               "generated cells below hold its code and run next. Edit the prompt or run with "
               "`--refresh` to ask again.*")
STALE_PIN_NOTE = ("*The prompt changed since this ask was answered (its `--pin` is for the "
                  "earlier prompt): asking the model. The generated cells below belong to the "
                  "earlier prompt and run after this cell unless you delete them.*")
REFRESH_PINNED_NOTE = ("*Asking again (`--refresh`). This ask was answered before, in "
                       "JupyterLab: its generated cells below still run after this cell unless "
                       "you delete them.*")
# A re-ask that costs tokens where a reuse was expected should say why.
UNVERIFIED_NOTE = ("*The answer saved with this cell was not signed by your jupyter-ci (it was "
                   "written elsewhere or edited), so it is not reused: asking the model.*")


def reuse(opts: AskOptions, info: RequestInfo, phash: str, namespace: Mapping[str, object],
          memory: Memory) -> bool:
    """Show the recorded answer and say so to memory; False when the model must be asked.

    Raise RecordWouldFail when the recorded cells would fail on what a restart lost.
    """
    if info.has_frontend:
        found = reusable_from_request(info, phash, opts.prompt)
    else:
        found = reusable_on_disk(phash, opts.prompt, info.source, Path.cwd(), info.cell_id
                                 ) if info.source is not None else Reuse()
    record = found.record
    if record is None and not info.has_frontend and opts.pin:
        return _pinned(opts, phash, memory)
    if record is None:
        if found.unverified:
            show_markdown(UNVERIFIED_NOTE)
        return False
    failing = would_fail(record, namespace)
    if failing is not None:
        raise failing  # said, and Run All stops here rather than in the cell below
    steps = record.steps
    cells = "the generated cell below holds" if steps == 1 else (
        f"the {steps} generated cells below hold")
    show_markdown(
        f"*Reusing the earlier answer ({record.model or 'model'}): {cells} its code. "
        "Edit the prompt or run with `--refresh` to ask again.*\n\n" + record.answer
    )
    # The recorded text is not put in the model's mouth: only that the ask was reused.
    memory.remember_summary(opts.prompt, REUSED_SUMMARY)
    if info.has_frontend:
        from jupyter_ci.kernel.comm import announce_reuse

        announce_reuse(info.cell_id, opts.prompt, record)
    return True


def _pinned(opts: AskOptions, phash: str, memory: Memory) -> bool:
    """Headless, with no record at hand: trust the pin to skip the ask, if it fits."""
    if opts.pin != pin_of(phash):
        show_markdown(STALE_PIN_NOTE)
        return False
    show_markdown(PINNED_NOTE)
    memory.remember_summary(opts.prompt, REUSED_SUMMARY)
    return True
