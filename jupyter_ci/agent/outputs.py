"""The one owner of a run's output list, fed with Jupyter IOPub messages.

Both executors use it: the kernel's (messages tapped from the kernel's own session) and
the server's (messages read over jupyter_client). It applies clear_output and display
updates the way a notebook does, and tells a listener each change, so views forward
changes and never keep a copy of the list.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, cast

from jupyter_ci.agent.feedback import human_size
from jupyter_ci.agent.types import Output
from jupyter_ci.wire.frozen import frozen

if TYPE_CHECKING:
    from jupyter_ci.wire.nbformat import (
        ClearOutputContent,
        DisplayContent,
        ErrorContent,
        ExecuteResultContent,
        MimeBundle,
        OutputContent,
        StreamContent,
    )

log = logging.getLogger(__name__)

#: IOPub message types that change a cell's outputs.
OUTPUT_MSG_TYPES = frozenset({"stream", "display_data", "execute_result", "error",
                              "update_display_data", "clear_output"})


@frozen
class OutputEvent:
    """One change of the output list."""

    kind: Literal["add", "clear", "replace"]
    #: add: the new output (nbformat v4).
    output: Output | None = None
    #: clear: wait for the next output before clearing.
    wait: bool = False
    #: replace: the whole list after a display was updated in place.
    outputs: tuple[Output, ...] = ()
    #: The list that changed, to read as it stands when needed (copying it at every change
    #: of a flood of prints would cost the square of their number).
    source: OutputList | None = field(default=None, compare=False, repr=False)


OnOutput = Callable[[OutputEvent], None]


def output_from_msg(msg_type: str, content: OutputContent) -> Output:
    """Build the nbformat v4 output of an IOPub message, as nbformat.v4.output_from_msg does."""
    # Importing nbformat costs over a second (jsonschema) for this small mapping.
    if msg_type == "stream":
        stream = cast("StreamContent", content)
        return {"output_type": "stream", "name": stream["name"], "text": stream["text"]}
    if msg_type == "error":
        error = cast("ErrorContent", content)
        return {"output_type": "error", "ename": error["ename"], "evalue": error["evalue"],
                "traceback": list(error["traceback"])}
    shown = cast("DisplayContent", content)
    if msg_type == "execute_result":
        count = cast("ExecuteResultContent", content)["execution_count"]
        return {"output_type": "execute_result", "data": shown["data"],
                "metadata": shown.get("metadata", {}), "execution_count": count}
    return {"output_type": "display_data", "data": shown["data"],
            "metadata": shown.get("metadata", {})}


@dataclass
class OutputList:
    """A run's outputs in arrival order, with clear_output and display updates applied."""

    on_event: OnOutput | None = None
    outputs: list[Output] = field(default_factory=list)
    shown: list[str | None] = field(default_factory=list)  # display_id of each output
    #: Displays of earlier runs (or cells) this run updated, by display_id, as they are now.
    elsewhere: dict[str, Output] = field(default_factory=dict)
    #: display_ids of this run's outputs that a clear_output removed.
    cleared: set[str] = field(default_factory=set)
    clear_pending: bool = False
    # In a kernel, stream outputs arrive on the IOPub thread and the others on the main one;
    # listeners are told under the lock too, so they see changes in the list's own order.
    lock: threading.RLock = field(default_factory=threading.RLock)

    def apply(self, msg_type: str, content: OutputContent) -> None:
        """Apply one IOPub output message."""
        shown = cast("DisplayContent", content)
        display_id = (shown.get("transient") or {}).get("display_id")
        if msg_type == "clear_output":
            self.clear(bool(cast("ClearOutputContent", content).get("wait")))
        elif msg_type == "update_display_data":
            if display_id:
                self.update(display_id, shown.get("data", {}), shown.get("metadata", {}))
        else:
            self.add(output_from_msg(msg_type, content), display_id)

    def add(self, output: Output, display_id: str | None = None) -> None:
        """Append an nbformat output."""
        with self.lock:
            if self.clear_pending:
                self._forget()
                self.clear_pending = False
            self.outputs.append(output)
            self.shown.append(display_id)
            self._emit(OutputEvent("add", output=output, source=self))

    def clear(self, wait: bool) -> None:
        """Clear the outputs now, or at the next output when `wait`."""
        with self.lock:
            self.clear_pending = wait
            if not wait:
                self._forget()
            self._emit(OutputEvent("clear", wait=wait, source=self))

    def update(self, display_id: str, data: MimeBundle, metadata: dict[str, object]) -> None:
        """Replace the data of every output showing `display_id`."""
        with self.lock:
            if display_id not in self.shown:
                if display_id not in self.cleared:
                    # Shown by an earlier run: not in this list, but the model must learn
                    # what it shows now (the last update wins).
                    self.elsewhere[display_id] = {"output_type": "display_data",
                                                  "data": data, "metadata": metadata}
                return
            for index, shown in enumerate(self.shown):
                if shown == display_id:
                    self.outputs[index] = _shown_anew(self.outputs[index], data, metadata)
            self._emit(OutputEvent("replace", outputs=tuple(self.outputs), source=self))

    def _forget(self) -> None:
        """Drop every output, remembering which displays they showed."""
        self.cleared.update(d for d in self.shown if d)
        self.outputs, self.shown = [], []

    def owns(self, display_id: str) -> bool:
        """Tell whether an output of this list shows `display_id`."""
        with self.lock:
            return display_id in self.shown

    def updated_elsewhere(self) -> list[Output]:
        """Return the displays of earlier runs this run updated, as they are now."""
        with self.lock:
            return list(self.elsewhere.values())

    def snapshot(self) -> tuple[Output, ...]:
        """Return the outputs as they stand now."""
        with self.lock:
            return tuple(self.outputs)

    def merged(self) -> list[Output]:
        """Return the outputs with consecutive stream outputs of one name joined."""
        with self.lock:
            return join_streams(list(self.outputs))

    def _emit(self, event: OutputEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:
            # This may run on the kernel's IOPub thread: raising there would lose the message.
            log.exception("output listener failed")


def _shown_anew(old: Output, data: MimeBundle, metadata: dict[str, object]) -> Output:
    """Return a display (or a result) showing new data; any other output as is."""
    # Only displays and results carry a display_id: streams and errors never match one.
    if old["output_type"] == "display_data":
        return {**old, "data": data, "metadata": metadata}
    if old["output_type"] == "execute_result":
        return {**old, "data": data, "metadata": metadata}
    return old


# -- caps on what is kept of outputs (the server's session history and run results) -------

#: Bytes of a cut text left for its note.
_NOTE_ROOM = 256
#: A head (tail) cut moves back (forward) to a line end when one is this close.
_SNAP_BYTES = 4096


def output_size(output: Output) -> int:
    """Return about how many bytes an output takes as JSON (its keys and strings, UTF-8)."""
    if output.get("output_type") == "stream" and len(output) == 3:  # the common case, fast
        return 48 + json_size(output.get("name")) + json_size(output.get("text"))
    return json_size(output)


def json_size(value: object) -> int:
    """Return about how many bytes a JSON value takes (its keys and strings, UTF-8)."""
    if isinstance(value, str):
        # isascii() is O(1) in CPython: only other text pays for an encoding to count.
        size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
        # JSON writes these as two characters (each count is one fast pass in C).
        return 2 + size + value.count("\n") + value.count('"') + value.count("\\")
    if isinstance(value, dict):  # {"key": value, ...}
        return 2 + sum(json_size(str(key)) + 4 + json_size(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return 2 + sum(json_size(item) + 2 for item in value)
    return 8  # a number, a boolean, null


def join_streams(outputs: list[Output], keep_apart: Output | None = None) -> list[Output]:
    """Join consecutive stream outputs of one name (but not `keep_apart`) into one each."""
    # One join per run of outputs: adding texts pairwise would copy the run once per print.
    joined: list[Output] = []
    texts: list[list[str]] = []
    for out in outputs:
        last = joined[-1] if joined else None
        if (out["output_type"] == "stream" and last is not None
                and last["output_type"] == "stream" and out["name"] == last["name"]
                and keep_apart is not out and keep_apart is not last):
            texts[-1].append(out["text"])
        else:
            joined.append(out)
            texts.append([out["text"]] if out["output_type"] == "stream" else [])
    return [_with_text(out, parts) for out, parts in zip(joined, texts, strict=True)]


def _with_text(out: Output, parts: list[str]) -> Output:
    """Return a stream output with its joined `parts` as text (any other output as is)."""
    if len(parts) > 1 and out["output_type"] == "stream":
        return {**out, "text": "".join(parts)}
    return out


def binary_size(size: int) -> str:
    """Write a setting's byte count as it was likely set (1048576 -> "1 MiB")."""
    for unit, name in ((1024 * 1024, "MiB"), (1024, "KiB")):
        if size and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def cut_note(size: int, keeps: str, what: str = "") -> str:
    """Say where an output was cut: how much, and which setting keeps how much."""
    return f"[… {what + ' of ' if what else ''}{human_size(size)} cut: {keeps} …]"


def cut_text(text: str, limit: int, keeps: str) -> str:
    """Keep the head and tail of `text` within about `limit` bytes, with a note between."""
    data = text.encode("utf-8", "surrogatepass")
    size = json_size(text)
    if size <= limit:
        return text
    # In bytes of UTF-8, less what JSON's escapes of this text add.
    half = max(limit - _NOTE_ROOM, 0) * len(data) // size // 2
    head, tail = data[:half], data[len(data) - half:]
    # Whole lines where a line end is near the cut.
    end = head.rfind(b"\n", max(half - _SNAP_BYTES, 0))
    head = head[:end + 1] if end >= 0 else head
    start = tail.find(b"\n", 0, _SNAP_BYTES)
    tail = tail[start + 1:] if start >= 0 else tail
    note = cut_note(len(data) - len(head) - len(tail), keeps)
    before = "\n" if head and not head.endswith(b"\n") else ""
    return (f"{head.decode('utf-8', 'ignore')}{before}{note}\n"
            f"{tail.decode('utf-8', 'ignore')}")


def cap_output(output: Output, limit: int, keeps: str) -> Output:
    """Return the output within about `limit` bytes (0: any size), with a note where cut.

    A stream keeps its head and tail; an error its head and tail of value and traceback; a
    display (or result) over the limit becomes a text/plain note, with its text/plain when
    that is small.
    """
    if limit <= 0 or (size := output_size(output)) <= limit:
        return output
    if output["output_type"] == "stream":
        text: object = output.get("text", "")  # a list of lines in a notebook's JSON
        name = output.get("name")
        return {"output_type": "stream", "name": name if name in ("stdout", "stderr") else
                "stdout", "text": cut_text("".join(map(str, text)) if isinstance(text, list)
                                           else str(text), limit, keeps)}
    if output["output_type"] == "error":
        traceback = "\n".join(map(str, output.get("traceback") or []))
        return {"output_type": "error",
                "ename": cut_text(str(output.get("ename", "")), limit // 8, keeps),
                "evalue": cut_text(str(output.get("evalue", "")), limit // 4, keeps),
                "traceback": cut_text(traceback, limit // 2, keeps).split("\n")}
    data = output.get("data")
    data = data if isinstance(data, dict) else {}
    plain = data.get("text/plain")
    small = isinstance(plain, str) and json_size(plain) <= limit // 2
    note = cut_note(size, keeps, ", ".join(sorted(k for k in data if k != "text/plain" or
                                                  not small)))
    shown: MimeBundle = {"text/plain": f"{plain}\n{note}" if small else note}
    if output["output_type"] == "execute_result":
        return {"output_type": "execute_result", "execution_count": output["execution_count"],
                "data": shown, "metadata": {}}
    return {"output_type": "display_data", "data": shown, "metadata": {}}
