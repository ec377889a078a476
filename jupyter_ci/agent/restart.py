"""Would the recorded steps run after a restart? What the loop does with the answer.

The notebook keeps one cell per step, holding that step's last code; a failed attempt's code
is not kept. After a restart the cells run top to bottom, so a step that reads a name only a
failed attempt (or only the live kernel) defined stops Run All with a NameError. The loop is
given a check (the kernel's is static, with `ast`: kernel/restart_check.py) and runs it
before it calls an ask done; a step that would fail is sent back to the model to be made
self-contained, within the ask's fix budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jupyter_ci.agent.prompts import TOOL_NAME
from jupyter_ci.wire.frozen import frozen


@frozen
class RestartProblem:
    """A kept step that would fail after a restart, and the names it would miss."""

    step: int
    names: tuple[str, ...]
    #: Those of `names` that a failed attempt of this ask defined (its code is not kept).
    from_failed: tuple[str, ...] = ()

    def reason(self) -> str:
        """Say why, in words the cell, the record and the model read."""
        shown = ", ".join(f"`{n}`" for n in self.names[:5]) + (
            " …" if len(self.names) > 5 else "")
        where = ("only a failed attempt of this ask defined" if self.names == self.from_failed
                 else "no cell above it nor an earlier step defines")
        return f"after a restart it would fail: it reads {shown}, which {where}"

    def notice(self) -> str:
        """Tell the user the model was sent back to make the step self-contained."""
        return f"Step {self.step}: {self.reason()}. Asking for a self-contained step."


#: Given the kept steps, (step, code) in order, and the code of the failed attempts, say
#: which steps would fail after a restart.
RestartCheck = Callable[[Sequence[tuple[int, str]], Sequence[str]], Sequence[RestartProblem]]


def restart_message(problem: RestartProblem) -> str:
    """Tell the model which step must become self-contained, and why."""
    names = ", ".join(f"`{n}`" for n in problem.names)
    made = ("only a failed attempt of this step defined it, and failed attempts are not kept"
            if problem.names == problem.from_failed else
            "no cell above this ask and no earlier step defines it (it exists only in this "
            "kernel, left by code that is no longer in the notebook)")
    return (
        f"[Restart check, nothing was run] Step {problem.step} reads {names}, but {made}. "
        "The notebook keeps only the final code of each step, one cell per step, and after "
        "a restart it runs top to bottom: each recorded cell must run on its own. Call "
        f"{TOOL_NAME} again with a self-contained version of step {problem.step} that "
        f"defines {names} itself (load or compute it again); it replaces step "
        f"{problem.step}'s cell. Then give your answer again."
    )
