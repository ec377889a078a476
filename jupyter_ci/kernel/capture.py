"""Tap a run's output messages, in true order, from a kernel's session or plain IPython."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from jupyter_ci.agent.outputs import OUTPUT_MSG_TYPES, OutputList

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from jupyter_ci.wire.nbformat import DisplayContent, OutputContent

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
    streams: list[Any] = [stream for stream in (sys.stdout, sys.stderr) if stream is not None]
    pub_thread = _shared_pub_thread(streams)
    if pub_thread is None:
        for stream in streams:
            stream.flush()
        return
    # ipykernel's flush() is a round trip to its IOPub thread per stream, each queued behind
    # what that thread has to send; one round trip does both, in the same order.
    done = threading.Event()
    for stream in streams:
        pub_thread.schedule(stream._flush)
    pub_thread.schedule(done.set)
    if not done.wait(max(stream.flush_timeout for stream in streams)):
        print("IOStream.flush timed out", file=sys.__stderr__)
        return
    for stream in streams:  # what an untouched stream looks like from now on
        _FLUSHED[id(stream)] = (stream, getattr(stream, "_buffers", None))


#: Per ipykernel stream: the stream and its (empty) buffers as the last flush here left them.
_FLUSHED: dict[int, tuple[Any, Any]] = {}


def settle_std_streams() -> None:
    """Flush stdout/stderr, unless nothing was written to them since the last flush here.

    ipykernel swaps a stream's buffers for new ones each time it sends them: the same empty
    buffers mean that nothing was written, and nothing is on its way, since then.
    """
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        seen, buffers = _FLUSHED.get(id(stream), (None, None))
        if seen is not stream or getattr(stream, "_buffers", None) is not buffers or buffers \
                or getattr(stream, "_flush_pending", True):
            flush_std_streams()
            return


def _shared_pub_thread(streams: list[Any]) -> Any:
    """Return the IOPub thread of ipykernel streams that all share it, if this is not it."""
    threads = {id(getattr(stream, "pub_thread", None)) for stream in streams}
    pub_thread = getattr(streams[0], "pub_thread", None) if len(threads) == 1 else None
    thread = getattr(pub_thread, "thread", None)
    if thread is None or not thread.is_alive() or thread.ident == threading.get_ident():
        return None  # not ipykernel's streams (plain IPython, a user's tee), or on that thread
    if not all(callable(getattr(stream, "_flush", None)) and isinstance(
            getattr(stream, "flush_timeout", None), int | float) for stream in streams):
        return None
    return pub_thread


def show_own_display(data: Mapping[str, object]) -> str | None:
    """Show a new display of the ask's own and return its display_id (None: not shown).

    As IPython's `display(data, raw=True, display_id=True)`, with one round trip to flush
    stdout/stderr (none when nothing was written since the last flush), not two.
    """
    display_id = uuid.uuid4().hex
    if not _send_own_display("display_data", data, display_id, settle_std_streams):
        return None
    return display_id


def update_own_display(data: Mapping[str, object], display_id: str) -> bool:
    """Rewrite one of the ask's own displays in place, without flushing stdout/stderr.

    ipykernel flushes both streams before each display message, to keep prints and displays
    in order: two round trips to its IOPub thread. An update rewrites a display where it is,
    so that order does not matter to it. Returns False where this does not apply (plain
    IPython, output hooks, display history), for the caller to update as usual.
    """
    return _send_own_display("update_display_data", data, display_id, None)


def _send_own_display(msg_type: str, data: Mapping[str, object], display_id: str,
                      before: Callable[[], None] | None) -> bool:
    """Send a display message as ipykernel's display publisher does; False: not here."""
    from IPython import get_ipython

    pub: Any = getattr(get_ipython(), "display_pub", None)
    session, socket = getattr(pub, "session", None), getattr(pub, "pub_socket", None)
    if session is None or socket is None or getattr(pub, "_hooks", True) or getattr(
            pub, "store_display_history", True):
        return False
    from ipykernel import jsonutil

    clean: Callable[[Any], Any] = jsonutil.json_clean
    encode: Callable[[Any], Any] = jsonutil.encode_images
    if before is not None:
        before()
    content: DisplayContent = {"data": encode(data), "metadata": {},
                               "transient": {"display_id": display_id}}
    msg = session.msg(msg_type, clean(content), parent=pub.parent_header)
    session.send(socket, msg, ident=pub.topic)
    return True


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
            # An output message of ipykernel's own making: its content has the type's shape.
            collector.apply(msg_type, cast("OutputContent", body or {}))
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


@dataclass
class _Tap:
    """Wrap plain IPython's output hooks so that each call also feeds the collector."""

    collector: OutputList
    passthrough: bool
    #: Hook calls under way: what IPython writes while it renders an output captured as
    #: such is no stream (IPython 8 has no flag for it; 9 has is_active, is_publishing, ...).
    rendering: int = 0

    def __call__(self, obj: object, name: str,
                 to_msg: Callable[..., tuple[str, OutputContent | None]]
                 ) -> contextlib.AbstractContextManager[None]:
        original: Callable[..., Any] = getattr(obj, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            msg_type, content = to_msg(*args, **kwargs)
            if content is not None:
                self.collector.apply(msg_type, content)
            if not self.passthrough:
                return None
            self.rendering += 1
            try:
                return original(*args, **kwargs)
            finally:
                self.rendering -= 1
        return swap(obj, name, wrapper)

    def stream(self, name: str) -> Callable[[str], tuple[str, OutputContent | None]]:
        """Turn a write to sys.stdout or sys.stderr into a stream output (or nothing)."""
        return lambda text: ("stream", None if not text or self.rendering else
                             {"name": name, "text": text})


def _display(data: Any, metadata: Any = None, *_: Any, transient: Any = None,
             update: bool = False, **__: Any) -> tuple[str, OutputContent | None]:
    msg_type = "update_display_data" if update else "display_data"
    return msg_type, {"data": data, "metadata": metadata or {}, "transient": transient}


@contextmanager
def tap_shell(shell: InteractiveShell, collector: OutputList, passthrough: bool
               ) -> Iterator[None]:
    """Capture outputs in plain IPython, without a kernel, by wrapping the shell's hooks."""
    # Degraded: text written straight to file descriptors (C code, subprocesses) is missed,
    # clear_output is not seen, and outputs reach no frontend but the terminal (as text).
    tap = _Tap(collector, passthrough)
    hook = shell.displayhook
    with ExitStack() as stack:
        stack.enter_context(tap(shell.display_pub, "publish", _display))
        stack.enter_context(tap(hook, "write_output_prompt", lambda: ("", None)))
        stack.enter_context(tap(hook, "write_format_data", lambda data, md=None: (
            "execute_result", {"data": data, "metadata": md or {},
                               "execution_count": hook.prompt_count})))
        stack.enter_context(tap(shell, "_showtraceback", lambda etype, evalue, stb: (
            "error", {"ename": etype.__name__, "evalue": str(evalue), "traceback": stb})))
        for name in ("stdout", "stderr"):
            stack.enter_context(tap(getattr(sys, name), "write", tap.stream(name)))
        yield
