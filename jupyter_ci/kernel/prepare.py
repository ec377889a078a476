"""Load the default model's SDK in the background once `%load_ext` has returned.

Importing `openai` or `anthropic` takes 1-4 s (thousands of pydantic models), and building
the client and the first stream another 100-500 ms: paid by the first ask, that made it
30-50x slower than the next. So the cell that loads the magic returns at once, and a
thread started when that cell has ended loads the default model's SDK (that one only),
builds its client, rehearses a streamed turn offline, then loads what the ask itself
loads on first use (detect-secrets, which brings `requests`; the Markdown renderer), while
the user types their first prompt.

It must not slow the user's cells. Sharing the GIL with a thread that imports made
`import pandas` 2.5x slower, so the thread pauses before each of its imports while a
cell runs, and goes on between cells. A pause never keeps a user's import waiting on a
module the thread is half-way through loading: it goes on at once when any thread
blocks on an import lock (importlib's `_ModuleLock.acquire`), which the user's import of
the same SDK, or of one of its dependencies, does. Other locks it cannot see, so it waits
at most MAX_PAUSE_S into a cell: a longer cell shares the GIL with what remains.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from jupyter_ci.config import JupyterCI
from jupyter_ci.models.base import Preparable
from jupyter_ci.models.resolve import ModelSettings, resolve_model

#: The thread's name, for tests and for anyone reading a thread dump.
THREAD_NAME = "jupyter-ci-prepare"
#: How often a paused preparation looks whether the cell ended or an import waits for it.
POLL_S = 0.005
#: How far into a cell the preparation stays paused.
MAX_PAUSE_S = 2.0
#: How long the thread waits before it begins: post_execute comes before the kernel sends
#: the cell's reply, which must not share the GIL with the first imports.
START_DELAY_S = 0.1
_IMPORTLIB = "<frozen importlib._bootstrap>"


def model_settings(settings: JupyterCI) -> ModelSettings:
    """Return what resolving a model needs from the settings."""
    return ModelSettings(settings.model, settings.request_timeout, settings.retries,
                         settings.record_dir, settings.fallback_model)


@dataclass
class Cells:
    """Follow whether a cell runs; cells nest (an ask runs its steps as cells)."""

    shell: Any
    running: int = 0
    #: When the outermost running cell began (time.monotonic).
    since: float = 0.0
    #: Set by the preparing thread when it has ended: the next cell event unregisters.
    done: bool = False
    watching: bool = False

    def watch(self) -> None:
        """Start following the shell's cells."""
        self.shell.events.register("pre_execute", self.pre)
        self.shell.events.register("post_execute", self.post)
        self.watching = True

    def pre(self) -> None:
        """A cell begins."""
        if self.running == 0:
            self.since = time.monotonic()
        self.running += 1
        self._stop_when_done()

    def post(self) -> None:
        """A cell ended."""
        self.running = max(0, self.running - 1)
        self._stop_when_done()

    def _stop_when_done(self) -> None:
        # Unregistered here, on the main thread: IPython triggers events from a copy of
        # the list, so a callback may remove itself.
        if self.done and self.watching:
            self.shell.events.unregister("pre_execute", self.pre)
            self.shell.events.unregister("post_execute", self.post)
            self.watching = False


@dataclass
class Courtesy:
    """An audit hook holding preparing threads back at each import while a cell runs."""

    threads: dict[int, Cells] = field(default_factory=dict)
    installed: bool = False

    def install(self) -> None:
        """Add the hook, once per process: audit hooks cannot be removed, so it stays."""
        if not self.installed:
            sys.addaudithook(self)
            self.installed = True

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        """Pause before an import of a preparing thread (the "import" event precedes it)."""
        if event == "import":
            cells = self.threads.get(threading.get_ident())
            if cells is not None:
                pause(cells)


def pause(cells: Cells) -> None:
    """Wait while a cell runs, unless an import waits for us or the cell runs long."""
    me = threading.get_ident()
    while (cells.running and time.monotonic() - cells.since < MAX_PAUSE_S
           and not import_waits(me)):
        time.sleep(POLL_S)


def import_waits(me: int) -> bool:
    """Tell whether a thread other than `me` is blocked on a module's import lock."""
    return any(ident != me and frame.f_code.co_name == "acquire"
               and frame.f_code.co_filename == _IMPORTLIB
               for ident, frame in sys._current_frames().items())


COURTESY = Courtesy()


def prepare_after_cell(shell: Any, settings: JupyterCI) -> None:
    """Prepare the default model in a thread started when the current cell has ended."""
    if not settings.preload_model:
        return

    def start() -> None:
        shell.events.unregister("post_execute", start)
        # Read now, not at %load_ext: the cell may have set %config JupyterCI.model.
        if settings.preload_model:
            cells = Cells(shell)
            cells.watch()
            COURTESY.install()
            threading.Thread(target=politely, args=(model_settings(settings), cells),
                             name=THREAD_NAME, daemon=True).start()

    # post_execute, not post_run_cell: JupyterLab loads the magic in a silent request,
    # which fires post_execute only.
    shell.events.register("post_execute", start)


def politely(settings: ModelSettings, cells: Cells) -> None:
    """Run prepare_default, pausing at imports while cells run."""
    me = threading.get_ident()
    COURTESY.threads[me] = cells
    try:
        time.sleep(START_DELAY_S)
        pause(cells)  # a cell that began meanwhile
        prepare_default(settings)
    finally:
        del COURTESY.threads[me]
        cells.done = True


def prepare_default(settings: ModelSettings) -> None:
    """Load the SDK of the default model and build its client, then the ask's own modules."""
    try:
        model = resolve_model(None, settings)
    except Exception:  # no model configured: the first ask says what to set
        return
    try:
        if isinstance(model, Preparable):
            model.prepare()
        prepare_ask()
    except Exception:  # the first ask meets, and reports, the same problem
        pass


def prepare_ask() -> None:
    """Import and build what an ask loads on first use, outside the user's namespace."""
    import importlib

    from jupyter_ci.agent.secrets import redact
    from jupyter_ci.kernel.safe_markdown import to_html

    for module in ("jupyter_ci.kernel.context", "jupyter_ci.kernel.executor"):
        importlib.import_module(module)  # loaded now, used by the first ask

    redact("warm-up")
    to_html("*warm-up*")
