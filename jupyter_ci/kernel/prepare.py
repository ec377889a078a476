"""Load the default model's SDK in the background once `%load_ext` has returned.

Importing `openai` or `anthropic` takes 1-4 s (thousands of pydantic models), and building
the client and the first stream another 100-500 ms: paid by the first ask, that made it
30-50x slower than the next. So the cell that loads the magic returns at once, and a
thread started when that cell has ended loads the default model's SDK, and that one
only, then what the ask itself loads on first use (detect-secrets, which brings `requests`:
~150 ms; the Markdown renderer), while the user types their first prompt.

The thread holds import locks only of the SDK and its dependencies, only while importing
them: a user's import of one of them waits at most for that module to finish loading (as
if they had imported it themselves); other imports do not wait at all. It sends nothing.
"""

from __future__ import annotations

import threading
from typing import Any

from jupyter_ci.config import JupyterCI
from jupyter_ci.models.base import Preparable
from jupyter_ci.models.resolve import ModelSettings, resolve_model

#: The thread's name, for tests and for anyone reading a thread dump.
THREAD_NAME = "jupyter-ci-prepare"


def model_settings(settings: JupyterCI) -> ModelSettings:
    """Return what resolving a model needs from the settings."""
    return ModelSettings(settings.model, settings.request_timeout, settings.retries)


def prepare_after_cell(shell: Any, settings: JupyterCI) -> None:
    """Prepare the default model in a thread started when the current cell has ended."""
    if not settings.preload_model:
        return

    def start(*_: object) -> None:
        shell.events.unregister("post_execute", start)
        # Read now, not at %load_ext: the cell may have set %config JupyterCI.model.
        if settings.preload_model:
            threading.Thread(target=prepare_default, args=(model_settings(settings),),
                             name=THREAD_NAME, daemon=True).start()

    # post_execute, not post_run_cell: JupyterLab loads the magic in a silent request,
    # which fires post_execute only.
    shell.events.register("post_execute", start)


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
    from jupyter_ci.agent.secrets import redact
    from jupyter_ci.kernel import context, executor  # noqa: F401 - imported for later
    from jupyter_ci.kernel.safe_markdown import to_html

    redact("warm-up")
    to_html("*warm-up*")
