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
from typing import Any, Literal

from jupyter_ci.agent.types import Output

log = logging.getLogger(__name__)

#: IOPub message types that change a cell's outputs.
OUTPUT_MSG_TYPES = frozenset({"stream", "display_data", "execute_result", "error",
                              "update_display_data", "clear_output"})


@dataclass(frozen=True)
class OutputEvent:
    """One change of the output list."""

    kind: Literal["add", "clear", "replace"]
    #: add: the new output (nbformat v4).
    output: Output | None = None
    #: clear: wait for the next output before clearing.
    wait: bool = False
    #: replace: the whole list after a display was updated in place.
    outputs: tuple[Output, ...] = ()


OnOutput = Callable[[OutputEvent], None]


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

    def apply(self, msg_type: str, content: dict[str, Any]) -> None:
        """Apply one IOPub output message."""
        display_id = (content.get("transient") or {}).get("display_id")
        if msg_type == "clear_output":
            self.clear(bool(content.get("wait")))
        elif msg_type == "update_display_data":
            if display_id:
                self.update(display_id, content.get("data", {}), content.get("metadata", {}))
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
            self._emit(OutputEvent("add", output=output))

    def clear(self, wait: bool) -> None:
        """Clear the outputs now, or at the next output when `wait`."""
        with self.lock:
            self.clear_pending = wait
            if not wait:
                self._forget()
            self._emit(OutputEvent("clear", wait=wait))

    def update(self, display_id: str, data: dict[str, Any], metadata: dict[str, Any]) -> None:
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
                    self.outputs[index] = {**self.outputs[index], "data": data,
                                           "metadata": metadata}
            self._emit(OutputEvent("replace", outputs=tuple(self.outputs)))

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

    def merged(self) -> list[Output]:
        """Return the outputs with consecutive stream outputs of one name joined."""
        merged: list[Output] = []
        with self.lock:
            outputs = list(self.outputs)
        for out in outputs:
            last = merged[-1] if merged else {}
            if out["output_type"] == last.get("output_type") == "stream" and (
                    out["name"] == last["name"]):
                merged[-1] = {**last, "text": last["text"] + out["text"]}
            else:
                merged.append(out)
        return merged

    def _emit(self, event: OutputEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:
            # This may run on the kernel's IOPub thread: raising there would lose the message.
            log.exception("output listener failed")
