"""Tap a run's output messages, in true order, from a kernel's session or plain IPython."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from jupyter_ci.agent.outputs import OUTPUT_MSG_TYPES, OutputList

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

log = logging.getLogger(__name__)

MISSING = object()
#: display_ids of the ask's own displays (its live Markdown): never a run's output.
OWN_DISPLAYS: set[str] = set()


def put_back(obj: object, name: str, saved: object) -> None:
    """Restore an instance attribute saved with `vars(obj).get(name, MISSING)`."""
    if saved is MISSING:
        vars(obj).pop(name, None)  # uncovers the class attribute (a method) again
    else:
        setattr(obj, name, saved)


@contextmanager
def swap(obj: object, name: str, value: object) -> Iterator[None]:
    """Set `obj.<name>` for the duration, then put back exactly what was there."""
    saved = vars(obj).get(name, MISSING)
    setattr(obj, name, value)
    try:
        yield
    finally:
        put_back(obj, name, saved)


def flush_std_streams() -> None:
    """Flush stdout/stderr: ipykernel then sends the pending stream messages."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


@contextmanager
def tap_session(kernel: Any, collector: OutputList, passthrough: bool) -> Iterator[None]:
    """Capture this request's output messages by wrapping `kernel.session.send`."""
    session = kernel.session
    original = session.send
    # Only messages of the %%ask request are ours, not those of other requests (subshells).
    parent_id = kernel.get_parent().get("header", {}).get("msg_id")

    def send(stream: Any, msg_or_type: Any, content: Any = None, parent: Any = None,
             *args: Any, **kwargs: Any) -> Any:
        if isinstance(msg_or_type, dict):  # a message built already (display, displayhook)
            msg_type = msg_or_type["header"]["msg_type"]
            header, body = msg_or_type.get("parent_header") or {}, msg_or_type.get("content")
        else:
            # `parent` is a header or a whole message (jupyter_client's extract_header)
            header = (parent.get("header", parent) if parent else None) or {}
            msg_type, body = msg_or_type, content
        if msg_type in OUTPUT_MSG_TYPES and parent_id and header.get("msg_id") == parent_id:
            if _own_display(body):
                # The ask's view showing a step's progress, not the step's output.
                return original(stream, msg_or_type, content, parent, *args, **kwargs)
            collector.apply(msg_type, body or {})
            if not passthrough and not _updates_elsewhere(msg_type, body, collector):
                return None
        return original(stream, msg_or_type, content, parent, *args, **kwargs)

    with ExitStack() as stack:
        stack.enter_context(swap(session, "send", send))
        # Runs before the unwrap: stream messages are sent later, by the IOPub thread.
        stack.callback(flush_std_streams)
        yield


def _own_display(body: Any) -> bool:
    """Tell whether a message shows or updates one of the ask's own displays."""
    transient = body.get("transient") if isinstance(body, dict) else None
    return isinstance(transient, dict) and transient.get("display_id") in OWN_DISPLAYS


def _updates_elsewhere(msg_type: str, body: Any, collector: OutputList) -> bool:
    """Tell whether a message updates a display this run did not show (an earlier cell's)."""
    # That display lives in another cell, which only the frontend can update: let it through.
    if msg_type != "update_display_data" or not isinstance(body, dict):
        return False
    display_id = (body.get("transient") or {}).get("display_id")
    return isinstance(display_id, str) and bool(display_id) and not collector.owns(display_id)


@contextmanager
def tap_shell(shell: InteractiveShell, collector: OutputList, passthrough: bool
               ) -> Iterator[None]:
    """Capture outputs in plain IPython, without a kernel, by wrapping the shell's hooks."""
    # Degraded: text written straight to file descriptors (C code, subprocesses) is missed,
    # clear_output is not seen, and outputs reach no frontend but the terminal (as text).
    def tap(obj: object, name: str, to_msg: Callable[..., tuple[str, dict[str, Any]]]
            ) -> contextlib.AbstractContextManager[None]:
        original: Callable[..., Any] = getattr(obj, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            msg_type, content = to_msg(*args, **kwargs)
            if msg_type:
                collector.apply(msg_type, content)
            return original(*args, **kwargs) if passthrough else None
        return swap(obj, name, wrapper)

    def display(data: Any, metadata: Any = None, *_: Any, transient: Any = None,
                update: bool = False, **__: Any) -> tuple[str, dict[str, Any]]:
        msg_type = "update_display_data" if update else "display_data"
        return msg_type, {"data": data, "metadata": metadata or {}, "transient": transient}

    def stream(name: str) -> Callable[[str], tuple[str, dict[str, Any]]]:
        # Skip what IPython writes while rendering outputs that are captured as such.
        return lambda text: ("" if not text or shell.displayhook.is_active
                             or shell.display_pub.is_publishing or shell.showing_traceback
                             else "stream", {"name": name, "text": text})

    hook = shell.displayhook
    with ExitStack() as stack:
        stack.enter_context(tap(shell.display_pub, "publish", display))
        stack.enter_context(tap(hook, "write_format_data", lambda data, md=None: (
            "execute_result", {"data": data, "metadata": md or {},
                               "execution_count": hook.prompt_count})))
        stack.enter_context(tap(shell, "_showtraceback", lambda etype, evalue, stb: (
            "error", {"ename": etype.__name__, "evalue": str(evalue), "traceback": stb})))
        for name in ("stdout", "stderr"):
            stack.enter_context(tap(getattr(sys, name), "write", stream(name)))
        yield
