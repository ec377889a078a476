"""Generated cells in IPython's history: their own numbers, on every IPython the package takes.

A step runs as a cell inside the running `%%ask` cell (`run_cell(store_history=True)`), so it
gets an execution count, an `In`/`_ih` entry and a line in the history database, as a cell the
user ran would. IPython 9 counts a cell before running it; IPython 8 counts it after, so a
cell run inside another is stored under the outer cell's number. Two inputs under one line
number make IPython's history writer print "ERROR! Session/line number was not unique in
database" into whatever cell runs when it next writes: the user's own next cell.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

#: Inputs IPython's history keeps in memory while generated code runs (see cached).
HISTORY_CACHE = 1_000


def _stored(shell: InteractiveShell) -> int | None:
    """Return the line number of the last input stored in history (None: no history)."""
    inputs = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    return len(inputs) - 1 if isinstance(inputs, list) else None


def running_count(shell: InteractiveShell) -> int:
    """Return the execution count of the cell running now (the `%%ask` cell's own)."""
    count = int(shell.execution_count)
    # IPython 8 stored the running cell under the count it has not yet moved past.
    return count if _stored(shell) == count else count - 1


@contextmanager
def own_number(shell: InteractiveShell) -> Iterator[None]:
    """Run a cell inside the running one under a number of its own, as IPython 9 does."""
    count = int(shell.execution_count)
    if _stored(shell) != count:  # IPython 9, or the running cell stored no input
        yield
        return
    shell.execution_count = count + 1
    try:
        yield
    finally:
        # The running cell adds one as it ends: the user's next cell gets the first number
        # no cell took. A run that stored its input took its number, counted or not (an
        # interrupt can stop IPython 8 between the two); one that stored none (an empty
        # cell) leaves the count as it was.
        stored = _stored(shell)
        shell.execution_count = stored if stored is not None and stored > count else count


@contextmanager
def cached(shell: InteractiveShell) -> Iterator[None]:
    """Keep the run's input in IPython's history cache; the next cell writes it out.

    IPython writes each cell's input to its SQLite database on a thread that holds the
    cache's lock through the commit (an fsync): a step right after another waited for the
    other's commit, milliseconds on a busy disk. As with IPython's `db_cache_size`, the
    inputs are written with the next cell's (or when the kernel exits); `In`, `_ih` and
    `%history` have them at once.
    """
    manager: Any = getattr(shell, "history_manager", None)
    size = getattr(manager, "db_cache_size", None)
    if not isinstance(size, int) or size >= HISTORY_CACHE:
        yield
        return
    manager.db_cache_size = HISTORY_CACHE
    try:
        yield
    finally:
        if manager.db_cache_size == HISTORY_CACHE:  # else the code set it: keep that
            manager.db_cache_size = size
