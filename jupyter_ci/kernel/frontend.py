"""Mirror an ask to the JupyterLab extension over the `jupyter_ci` comm (docs/protocol.md)."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jupyter_ci.agent.disclosure import Part
from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.loop import RunCode
from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.agent.restart import RestartProblem
from jupyter_ci.agent.types import CodeResult
from jupyter_ci.kernel.protocol import COMM_TARGET, PROTOCOL_VERSION
from jupyter_ci.kernel.record import AskInfo, pin_of
from jupyter_ci.kernel.views import (
    REFRESH_S,
    LiveMarkdown,
    ending,
    keep_busy,
    show_sent,
    step_title,
)


def announce_reuse(cell_id: str | None, prompt: str, record: dict[str, Any]) -> None:
    """Tell the panel that a re-run reused its answer (one comm, opened and closed)."""
    from comm import create_comm

    create_comm(target_name=COMM_TARGET, data={
        "type": "ask_reused", "ask_id": record.get("ask_id"), "protocol": PROTOCOL_VERSION,
        "cell_id": cell_id, "prompt": prompt, "model": record.get("model", ""),
        "answer": record.get("answer", ""), "steps": record.get("steps", 0),
        "pin": pin_of(str(record.get("prompt_hash", ""))),
    }).close()


@dataclass
class FrontendView:
    """Steps become cells in the browser; the %%ask cell keeps a progress log and the answer."""

    info: AskInfo
    passthrough: bool = False
    _comm: Any = None
    _log: list[str] = field(default_factory=list)
    _log_view: LiveMarkdown = field(default_factory=LiveMarkdown)
    _answer: LiveMarkdown | None = None
    _pending_delta: str = ""
    _sent_at: float = 0.0
    #: The step whose outputs arrive now.
    _step: int = 0
    #: What the model said before each tool call: kept, and shown before the answer.
    _narration: list[str] = field(default_factory=list)
    #: The text of the model's turn under way (narration or the answer).
    _turn_text: str = ""
    #: Each step's name in the log, from its first attempt (a fix keeps it).
    _titles: dict[int, str] = field(default_factory=dict)
    #: Since when the model has been thinking (no step running, no text yet), if it is.
    _thinking_since: float | None = None
    # The log is rendered from the main thread and, while the model thinks, from a ticker.
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _ticking: threading.Event | None = None
    # The last step and attempt that ran, and whether it failed: a preview of code being
    # written is a fix of that step when it failed, else the next step.
    _last_run: tuple[int, int, bool] = (0, 0, False)
    _preview_sent_at: float = 0.0
    # The first failure of each step, so its final log line can say it was fixed.
    _failures: dict[int, str] = field(default_factory=dict)
    # What a page that missed the ask needs to catch up (ask_state): the ask_start, step_start
    # and step_end messages so far, and each step's outputs as they stand now.
    _control: list[dict[str, Any]] = field(default_factory=list)
    _outputs: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    _clear_on_next: set[int] = field(default_factory=set)
    # Steps the restart check sent back; the log line of the next attempt follows its notice.
    _redone: set[int] = field(default_factory=set)
    _notice_last: bool = False

    def start(self) -> None:
        """Open the comm with ask_start; the browser finds the %%ask cell by id."""
        from comm import create_comm

        opening = self._msg(
            "ask_start", cell_id=self.info.cell_id, prompt=self.info.prompt,
            model=self.info.model, replace_ask_id=self.info.replace_ask_id,
            execution_count=self.info.execution_count,
        )
        self._control.append(opening)
        self._comm = create_comm(target_name=COMM_TARGET, data=opening)
        self._progress(f"Asking {self.info.model}…")
        self._think()

    def text(self, delta: str) -> None:
        """Stream the answer into the cell and, batched, to the panel."""
        if self._answer is None:
            self._answer = LiveMarkdown()
        if self._thinking_since is not None:
            self._thinking_since = None  # it writes now: the text is the progress
            self._render()
        if not self._turn_text and self._narration:
            delta = "\n\n" + delta  # a new turn: its own paragraph after the narration
        self._turn_text += delta
        self._answer.append(delta)
        self._pending_delta += delta
        if time.monotonic() - self._sent_at >= REFRESH_S:
            self._send_delta()

    def turn_end(self) -> None:
        """Flush streamed text; narration before a tool call stays in the log."""
        self._send_delta()
        if self._answer is not None:
            self._answer.flush()

    def code_preview(self, code: str) -> None:
        """Show the code of the model's next step as it writes it, a few times a second."""
        if time.monotonic() - self._preview_sent_at < REFRESH_S:
            return
        self._preview_sent_at = time.monotonic()
        if self._thinking_since is not None:
            self._thinking_since = None  # it writes code now: the code is the progress
            self._render()
        step, attempt, failed = self._last_run
        nxt = (step, attempt + 1) if failed else (step + 1, 1)
        self._send("code_preview", step=nxt[0], attempt=nxt[1], code=code)

    def step_start(self, run: RunCode) -> None:
        """Ask the browser for the step's cell; note it in the log."""
        narration = self._turn_text.strip()
        if narration:
            # The text before a tool call is narration: it stays, above the answer.
            self._narration.append(narration)
        self._turn_text = ""
        self._thinking_since = None
        self._step = run.step
        self._outputs[run.step] = []
        self._clear_on_next.discard(run.step)
        self._send("step_start", step=run.step, attempt=run.attempt, code=run.code)
        title = self._titles.setdefault(run.step, step_title(run, narration))
        if run.attempt > 1:
            title = step_title(run, narration)  # "(fix, attempt 2)", an install's own words
        # A fix takes the place of its step's line, unless a notice came between them.
        self._progress(f"{title}: running…", replace=run.attempt > 1 and not self._notice_last)
        self._notice_last = False
        self._broadcast_state()

    def output(self, event: OutputEvent) -> None:
        """Forward one change of the current step's outputs to its cell."""
        step = self._step
        now = self._outputs.setdefault(step, [])
        if event.kind == "add" and event.output is not None:
            if step in self._clear_on_next:
                self._clear_on_next.discard(step)
                now.clear()
            now.append(event.output)
            self._send("output", step=step, output=event.output)
        elif event.kind == "clear":
            if event.wait:
                self._clear_on_next.add(step)
            else:
                now.clear()
            self._send("clear_output", step=step, wait=event.wait)
        elif event.kind == "replace":
            now[:] = event.outputs
            self._send("set_outputs", step=step, outputs=list(event.outputs))

    def step_end(self, run: RunCode, result: CodeResult) -> None:
        """Report the step's status and execution count."""
        error = result.error
        self._last_run = (run.step, run.attempt, not result.ok)
        self._send(
            "step_end", step=run.step, attempt=run.attempt, status=result.status,
            execution_count=result.execution_count, duration_s=round(result.duration_s, 3),
            error={"ename": error.ename, "evalue": error.evalue} if error else None,
        )
        failure = "timed out" if result.status == "timeout" else (
            f"failed ({error.ename if error else result.status})")
        if not result.ok:
            self._failures.setdefault(run.step, failure)
        first = self._failures.get(run.step)
        name = self._titles.get(run.step, f"Step {run.step}")
        if result.ok:
            # The log keeps what went wrong before the fix: "failed (NameError) → fixed".
            done = f"installed {run.package}" if run.kind == "install" else (
                "fixed" if first else "done")
            if run.step in self._redone:  # its notice, just above, said what went wrong
                first, done = None, "made self-contained"
            line = f"{name}: {first + ' → ' if first else ''}{done} " \
                f"({result.duration_s:.1f} s)"
        elif result.status in ("interrupted", "died"):
            line = f"{name}: {result.status}"
        else:
            line = f"{name}: {failure} → fixing"
        self._progress(line, replace=True)
        self._broadcast_state()
        self._think()

    def restart_fix(self, problem: RestartProblem) -> None:
        """Log that the model must redo a step; the code it writes goes to that step's cell."""
        attempts = [m["attempt"] for m in self._control
                    if m["type"] == "step_start" and m["step"] == problem.step]
        self._last_run = (problem.step, max(attempts, default=1), True)
        self._turn_text = ""  # the answer sent back is no narration: a new one comes
        self._redone.add(problem.step)
        if self._answer is not None:
            self._answer.set("\n\n".join(self._narration))
        self._progress(f"⚠ {problem.notice()}")
        self._notice_last = True

    def waiting_for_user(self) -> None:
        """A question waits on stdin: stop counting the model's thinking time."""
        self._thinking_since = None
        self._render()

    def note(self, text: str) -> None:
        """Add a warning to the %%ask cell's log."""
        self._progress(f"⚠ {text}")

    def finish(self, answer: str, record: dict[str, Any]) -> None:
        """Send the record for the %%ask cell's metadata and close the comm."""
        self._stop_ticker()
        self._send_delta()
        # What the model said between steps stays, above its answer (cell and panel).
        answer = "\n\n".join([*self._narration, answer.strip()])
        if self._answer is None or self._answer.text.strip() != answer.strip():
            self._answer = self._answer or LiveMarkdown()
            self._answer.set(answer)
        if record.get("unresolved") and self._log and self._log[-1].endswith(" → fixing"):
            # The model answered instead: the step was never fixed.
            self._progress(self._log[-1].removesuffix(" → fixing") + " → not fixed",
                           replace=True)
        self._progress(ending(self.info.model, record))
        self._end("done", answer=answer, error=None, record=record,
                  unresolved=record.get("unresolved"),
                  pin=pin_of(str(record.get("prompt_hash", ""))))

    def sent(self, parts: Sequence[Part]) -> None:
        """Show what was sent in the cell, folded, and give it to the panel (`context`)."""
        show_sent(self.info.model, parts)
        self.disclose(parts)

    def disclose(self, parts: Sequence[Part]) -> None:
        """Give the panel what the last model call sent, for its per-ask disclosure."""
        self._send("context", parts=[part.to_json() for part in parts])

    def fail(self, error: AskError, status: str, record: dict[str, Any]) -> None:
        """Tell the browser the ask ended without an answer."""
        self._stop_ticker()
        self._send_delta()
        self._progress(f"Ask {status}: {error.message}")
        self._end(status, answer="", error=str(error), record=record)

    def _progress(self, line: str, replace: bool = False) -> None:
        keep_busy()
        with self._lock:
            if replace and self._log:
                self._log[-1] = line
            else:
                self._log.append(line)
            self._render()

    def _render(self) -> None:
        """Show the log; while the model thinks, its last line counts the seconds."""
        with self._lock:
            lines = list(self._log)
            since = self._thinking_since
            if since is not None and lines and time.monotonic() - since >= 1:
                lines[-1] += f" · thinking {time.monotonic() - since:.0f} s"
            self._log_view.set("\n".join(f"- {entry}" for entry in lines))

    def _think(self) -> None:
        """The model is called now: count the seconds in the log until it writes or runs."""
        self._thinking_since = time.monotonic()
        if self._ticking is None:
            self._ticking = threading.Event()
            # The copied context carries the request's parent header (a ContextVar in
            # ipykernel 7), so the ticker's updates go to the %%ask cell's output.
            context = contextvars.copy_context()
            threading.Thread(target=context.run, args=(self._tick, self._ticking),
                             name="jupyter-ci-ticker", daemon=True).start()

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            if self._thinking_since is not None:
                keep_busy()
                self._render()

    def _stop_ticker(self) -> None:
        self._thinking_since = None
        if self._ticking is not None:
            self._ticking.set()
            self._ticking = None

    def _send_delta(self) -> None:
        keep_busy()
        if self._pending_delta:
            self._send("answer_delta", text=self._pending_delta)
            self._pending_delta = ""
        self._sent_at = time.monotonic()

    def _msg(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "ask_id": self.info.ask_id, "protocol": PROTOCOL_VERSION, **fields}

    def _send(self, kind: str, **fields: Any) -> None:
        msg = self._msg(kind, **fields)
        if kind in ("step_start", "step_end"):
            self._control.append(msg)
        if self._comm is not None:
            self._comm.send(msg)

    def _replay(self) -> list[dict[str, Any]]:
        """The ask so far as messages a page can apply in order: each step's outputs as
        they stand now follow its last step_start (earlier attempts' outputs were cleared)."""
        last_start = {m["step"]: i for i, m in enumerate(self._control)
                      if m["type"] == "step_start"}
        messages: list[dict[str, Any]] = []
        for i, msg in enumerate(self._control):
            messages.append(msg)
            if msg["type"] == "step_start" and last_start[msg["step"]] == i:
                messages.append(self._msg("set_outputs", step=msg["step"],
                                          outputs=list(self._outputs.get(msg["step"], []))))
        return messages

    def _broadcast_state(self, end: dict[str, Any] | None = None) -> None:
        """Tell every page on this kernel where the ask stands, on a comm opened and closed
        at once: a page reloaded mid-ask, or a second tab, never saw the ask's comm open, so
        it rebuilds the ask's cells from this and listens on `comm_id` for the rest."""
        from comm import create_comm

        if self._comm is None:
            return
        messages = self._replay() + ([end] if end is not None else [])
        create_comm(target_name=COMM_TARGET, data=self._msg(
            "ask_state", cell_id=self.info.cell_id, notebook=self.info.notebook,
            comm_id=self._comm.comm_id, live=end is None, log=list(self._log),
            messages=messages,
        )).close()

    def _end(self, status: str, **fields: Any) -> None:
        # Pages that follow the ask ignore this state (they know the ask); a page that
        # missed all of it gets the whole ask, its end included, before the comm closes.
        self._broadcast_state(end=self._msg("ask_end", status=status, **fields))
        self._send("ask_end", status=status, **fields)
        if self._comm is not None:
            self._comm.close()
            self._comm = None
