"""The outputs a REST run keeps for its result: about a byte limit, head and tail kept."""

from __future__ import annotations

from dataclasses import dataclass, field

from jupyter_ci.agent.outputs import (
    OutputEvent,
    OutputList,
    binary_size,
    cap_output,
    cut_note,
    join_streams,
    output_size,
)
from jupyter_ci.agent.types import Output
from jupyter_ci.wire.nbformat import DisplayData, MimeBundle, StreamOutput


@dataclass
class CappedOutputs(OutputList):
    """A run's outputs, keeping about `limit` bytes: their head and tail, a note between.

    Listeners are still told every output whole, as it came (a streaming request sends them
    all); only what the run keeps for its result is cut, so a flood costs the server at most
    about the limit however long it runs.
    """

    limit: int = 16 * 1024 * 1024
    #: The size of each kept output (output_size), and of all of them.
    sizes: list[int] = field(default_factory=list)
    held: int = 0
    #: Bytes dropped from the middle so far, and the stream output that says so (at `at`).
    cut: int = 0
    note: StreamOutput | None = None
    at: int = 0
    #: Kept outputs past which consecutive stream outputs are joined (many small prints).
    join_at: int = 1024
    #: Bytes of the displays of earlier runs this run updated (`elsewhere`).
    elsewhere_bytes: int = 0

    @property
    def keeps(self) -> str:
        """Say what a cut output's note names: the setting and its value."""
        return (f"an execute keeps at most {binary_size(self.limit)} of outputs for its "
                "result (c.JupyterCI.session_run_output_bytes); its streamed output events "
                "carry them all")

    def add(self, output: Output, display_id: str | None = None) -> None:
        """Append an output (cut to half the limit); past the limit, drop from the middle."""
        with self.lock:
            if self.clear_pending:
                self._forget()
                self.clear_pending = False
            kept, size = output, output_size(output)
            if size > self.limit // 2:
                kept = cap_output(output, self.limit // 2, self.keeps)
                size = output_size(kept)
            self.outputs.append(kept)
            self.shown.append(display_id)
            self.sizes.append(size)
            self.held += size
            self._fit()
            self._emit(OutputEvent("add", output=output, source=self))

    def update(self, display_id: str, data: MimeBundle, metadata: dict[str, object]) -> None:
        """Update a display, its new data cut to half the limit too."""
        shown: DisplayData = {"output_type": "display_data", "data": data, "metadata": metadata}
        capped = cap_output(shown, self.limit // 2, self.keeps)
        if capped["output_type"] == "display_data":  # a display stays one when cut
            shown = capped
        with self.lock:
            earlier = self.elsewhere.get(display_id)
            if earlier is None and self.elsewhere_bytes > self.limit // 2:
                return  # updates of many earlier displays: the first ones are enough
            super().update(display_id, shown["data"], shown["metadata"])
            if display_id in self.elsewhere:
                self.elsewhere_bytes += output_size(self.elsewhere[display_id]) - (
                    0 if earlier is None else output_size(earlier))
            if display_id in self.shown:
                self._measure()
                self._fit()

    def _measure(self) -> None:
        """Size every kept output again (after a display update or a join)."""
        self.sizes = [output_size(out) for out in self.outputs]
        self.held = sum(self.sizes)

    def _fit(self) -> None:
        """Join runs of small prints now and then; drop from the middle past the limit."""
        if len(self.outputs) >= self.join_at:
            # Streams never carry a display_id: the others' ids keep their order.
            ids = iter([display for out, display in zip(self.outputs, self.shown, strict=True)
                        if out["output_type"] != "stream"])
            self.outputs = join_streams(self.outputs, keep_apart=self.note)
            self.shown = [None if out["output_type"] == "stream" else next(ids)
                          for out in self.outputs]
            self.at = next((i for i, out in enumerate(self.outputs) if out is self.note), 0)
            self._measure()
            self.join_at = max(1024, 2 * len(self.outputs))
        if self.held > self.limit:
            self._drop_middle()

    def _drop_middle(self) -> None:
        """Drop the oldest outputs after the head until the kept ones fit the limit."""
        if self.note is None:
            head, self.at = 0, 0
            while self.at < len(self.outputs) - 1 and (
                    not self.at or head + self.sizes[self.at] <= self.limit // 2):
                head += self.sizes[self.at]
                self.at += 1
            first = self.outputs[self.at]
            name = first["name"] if first["output_type"] == "stream" else "stdout"
            self.note = {"output_type": "stream", "name": name, "text": ""}
            self.outputs.insert(self.at, self.note)
            self.shown.insert(self.at, None)
            self.sizes.insert(self.at, 0)
        # Down to 7/8 of the limit: the next drop waits for that much more output, so a
        # flood of small prints does not shift the list at every one of them.
        start = end = self.at + 1
        over = self.held - self.limit * 7 // 8
        while over > 0 and end < len(self.outputs) - 1:  # the newest output stays
            over -= self.sizes[end]
            end += 1
        self.held -= sum(self.sizes[start:end])
        self.cut += sum(_content_size(out) for out in self.outputs[start:end])
        self.cleared.update(d for d in self.shown[start:end] if d)
        del self.outputs[start:end], self.shown[start:end], self.sizes[start:end]
        self.note["text"] = cut_note(self.cut, self.keeps) + "\n"

    def _forget(self) -> None:
        super()._forget()
        self.sizes, self.held, self.cut, self.note, self.at = [], 0, 0, None, 0


def _content_size(output: Output) -> int:
    """Return the bytes of a stream's text (what a note says was cut), else the output's."""
    if output["output_type"] == "stream" and isinstance(output.get("text"), str):
        return len(output["text"].encode("utf-8", "surrogatepass"))
    return output_size(output)
