"""Capture a run's outputs as nbformat dicts, in true order, from a kernel or plain IPython."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jupyter_ci.agent.types import Output

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

log = logging.getLogger(__name__)

OUTPUT_MSG_TYPES = frozenset({"stream", "display_data", "execute_result", "error",
                              "update_display_data", "clear_output"})
MISSING = object()


@dataclass
class Collector:
    """Collect outputs in arrival order and mirror each one to a callback."""

    on_output: Callable[[Output], None] | None
    outputs: list[Output] = field(default_factory=list)
    shown: list[str | None] = field(default_factory=list)  # display_id of each output
    clear_pending: bool = False
    # Stream outputs arrive on the IOPub thread, the others on the main thread.
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, output: Output, display_id: str | None = None) -> None:
        """Append an nbformat output."""
        with self.lock:
            if self.clear_pending:
                self.outputs, self.shown, self.clear_pending = [], [], False
            self.outputs.append(output)
            self.shown.append(display_id)
        # The display id lets a mirror apply later updates; it is not part of nbformat.
        self._emit({**output, "transient": {"display_id": display_id}} if display_id else output)

    def clear(self, wait: bool) -> None:
        """Clear the outputs now, or at the next output when `wait`."""
        with self.lock:
            self.clear_pending = wait
            if not wait:
                self.outputs, self.shown = [], []
        self._emit({"output_type": "clear_output", "wait": wait})

    def update(self, display_id: str, data: dict[str, Any], metadata: dict[str, Any]) -> None:
        """Replace the data of every output showing `display_id`."""
        with self.lock:
            for output, shown in zip(self.outputs, self.shown, strict=True):
                if shown == display_id:
                    output["data"], output["metadata"] = data, metadata
        self._emit({"output_type": "update_display_data", "data": data, "metadata": metadata,
                    "transient": {"display_id": display_id}})

    def merged(self) -> list[Output]:
        """Return the outputs with consecutive stream outputs of one name joined."""
        merged: list[Output] = []
        for out in self.outputs:
            last = merged[-1] if merged else {}
            if out["output_type"] == last.get("output_type") == "stream" and (
                    out["name"] == last["name"]):
                merged[-1] = {**last, "text": last["text"] + out["text"]}
            else:
                merged.append(out)
        return merged

    def _emit(self, output: Output) -> None:
        try:
            if self.on_output is not None:
                self.on_output(output)
        except Exception:
            # This may run on the IOPub thread: raising there would lose the message.
            log.exception("on_output callback failed")


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


def output_from_msg(msg_type: str, content: dict[str, Any]) -> Output:
    """Build the nbformat v4 output of an IOPub message, as nbformat.v4.output_from_msg does."""
    # Importing nbformat costs over a second (jsonschema) for this small mapping.
    if msg_type == "stream":
        return {"output_type": "stream", "name": content["name"], "text": content["text"]}
    if msg_type == "error":
        return {"output_type": "error", "ename": content["ename"], "evalue": content["evalue"],
                "traceback": list(content["traceback"])}
    output = {"output_type": msg_type, "data": content["data"],
              "metadata": content.get("metadata", {})}
    if msg_type == "execute_result":
        output["execution_count"] = content["execution_count"]
    return output


def capture(collector: Collector, msg_type: str, content: dict[str, Any]) -> None:
    """Record one IOPub output message."""
    display_id = (content.get("transient") or {}).get("display_id")
    if msg_type == "clear_output":
        collector.clear(bool(content.get("wait")))
    elif msg_type == "update_display_data":
        if display_id:
            collector.update(display_id, content.get("data", {}), content.get("metadata", {}))
    else:
        collector.add(output_from_msg(msg_type, content), display_id)


@contextmanager
def tap_session(kernel: Any, collector: Collector, passthrough: bool) -> Iterator[None]:
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
            capture(collector, msg_type, body or {})
            if not passthrough:
                return None
        return original(stream, msg_or_type, content, parent, *args, **kwargs)

    with ExitStack() as stack:
        stack.enter_context(swap(session, "send", send))
        # Runs before the unwrap: stream messages are sent later, by the IOPub thread.
        stack.callback(flush_std_streams)
        yield


@contextmanager
def tap_shell(shell: InteractiveShell, collector: Collector, passthrough: bool
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
                capture(collector, msg_type, content)
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
