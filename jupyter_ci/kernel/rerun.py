"""Headless re-runs of a cell answered headless before (see headless_store).

The kept steps run again, inline, without asking the model for code. Their answer is shown
as this run's only when it was written in this notebook from the same outputs; otherwise
the model is asked once, with no tools, for the answer from this run's outputs, and only
when no model is configured is the earlier answer shown, marked as written for another run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from jupyter_ci.agent.drive import Executor
from jupyter_ci.agent.errors import AskInterrupted, ModelConfigError
from jupyter_ci.agent.events import Journal, StepEnded, StepStarted
from jupyter_ci.agent.feedback import Redact, tool_result
from jupyter_ci.agent.loop import Limits, RunCode
from jupyter_ci.agent.reanswer import reanswer_request, reanswer_text
from jupyter_ci.agent.types import CodeResult
from jupyter_ci.kernel import headless_store
from jupyter_ci.kernel.headless_store import Kept, KeptAnswer
from jupyter_ci.kernel.protocol import AskInfo
from jupyter_ci.kernel.views import InlineView, LiveMarkdown, show_markdown
from jupyter_ci.models.base import ChatModel

REPLAY_NOTE = ("*Reusing an earlier headless run of this cell: its {steps} step(s) run again "
               "below, and the model is not asked for their code. Run with `--refresh` to ask "
               "again.*")
REPLAY_FAILED_NOTE = ("*Step {step} of the earlier answer fails now: asking the model "
                      "instead.*")
REANSWERED_NOTE = ("*{model} wrote this answer from this run's outputs (one call, nothing "
                   "run): the kept one was written for an earlier run {why}.*")
EARLIER_NOTE = ("*⚠ No model is configured, so this is the answer written for an earlier run "
                "{why}: check it against the outputs above.*")
REPLAYING_NOTE = ("*⚠ {model} replays a recording and cannot answer new outputs, so this is "
                  "the answer written for an earlier run {why}: check it against the outputs "
                  "above.*")
#: A model answered the one turn with no text (an empty reply, or only a refused tool call).
NO_ANSWER_NOTE = ("*⚠ {model} gave no answer from this run's outputs, so this is the answer "
                  "written for an earlier run {why}: check it against the outputs above, or "
                  "run the cell with `--refresh` to ask the model again from the start.*")
#: What memory keeps of a re-run whose kept steps ran again.
RERUN_SUMMARY = ("(Not asked for code this time: the steps an earlier run of this ask kept "
                 "ran again.) Answer: {answer}")


@dataclass
class KeepResults:
    """An executor that keeps the result of each successful run, by its code."""

    executor: Executor
    results: dict[str, CodeResult] = field(default_factory=dict)

    def run(self, code: str, timeout: float) -> CodeResult:
        """Run `code` and keep its result when it succeeded."""
        result = self.executor.run(code, timeout)
        if result.ok:
            self.results[code] = result
        return result


def digest(text: str) -> str:
    """Return a short digest of some text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def notebook_identity(cwd: Path) -> str:
    """Digest the notebook being run, by its path as far as the runner tells the kernel.

    `JUPYTER_CI_NOTEBOOK` (or the server's `JPY_SESSION_NAME`, or papermill's injected
    input path) names it, else the runner's command line (papermill's input notebook comes
    first); nbclient says only where the kernel starts, so two notebooks run from one folder
    that way are told apart by their steps' outputs alone.
    """
    from jupyter_ci.kernel.notebook_path import named_notebooks, runner_notebooks

    found = named_notebooks(cwd) or runner_notebooks() or [cwd]
    return digest(os.path.normpath(os.path.abspath(found[0])))


def output_digest(code: str, result: CodeResult | None, limits: Limits, redact: Redact
                  ) -> str:
    """Digest a step's outputs as the model reads them; "" for an install (pip's log varies)."""
    if result is None or code.lstrip().startswith("%pip install"):
        return ""
    # Files by name only: a log the step appends to grows on every run.
    files = "\n".join(sorted(f.path for f in result.files))
    return digest(output_text(replace(result, files=[]), limits, redact) + "\n" + files)


def output_text(result: CodeResult, limits: Limits, redact: Redact) -> str:
    """Return a run's outputs as the model reads them (text, redacted, capped)."""
    return tool_result(result, limits.timeout, limits.max_output_chars, redact).text


def keep(source: str, model: str, answer: str, steps: Sequence[tuple[int, str]],
         results: dict[str, CodeResult], limits: Limits, redact: Redact) -> None:
    """Keep an ask answered headless, with what its answer was written from."""
    codes = [code for _, code in steps]
    outputs = tuple(output_digest(code, results.get(code), limits, redact) for code in codes)
    headless_store.save(source, codes, KeptAnswer(
        answer, model, notebook_identity(_cwd() or Path(os.sep)), outputs, headless_store.now()))


@dataclass
class Replay:
    """Runs one cell's kept steps again and shows the answer that fits this run."""

    shell: InteractiveShell
    prompt: str
    limits: Limits
    redact: Redact
    cell_id: str | None = None

    def run(self, source: str, kept: Kept, resolve: Callable[[], ChatModel]) -> str | None:
        """Run the steps and show the answer; return a summary for memory, or None to ask."""
        show_markdown(REPLAY_NOTE.format(steps=len(kept.steps)))
        results = self._run_steps(kept.steps)
        if results is None:
            return None
        notebook = notebook_identity(_cwd() or Path(os.sep))
        outputs = tuple(output_digest(code, result, self.limits, self.redact)
                        for code, result in zip(kept.steps, results, strict=True))
        found = kept.answer_for(notebook, outputs)
        if found is not None:
            show_markdown(found.answer)
            return RERUN_SUMMARY.format(answer=found.answer)
        earlier = _closest(kept.answers, notebook)
        why = "with other outputs" if earlier is None or earlier.notebook == notebook else (
            "in another notebook")
        try:
            model = resolve()
        except ModelConfigError:
            model = None
        answer, note = None, EARLIER_NOTE.format(why=why)
        if model is not None and model.id.startswith("replay:"):
            note = REPLAYING_NOTE.format(model=model.id, why=why)
        elif model is not None:
            answer = self._reanswer(model, kept.steps, results, why)
            note = NO_ANSWER_NOTE.format(model=model.id, why=why)
        if answer is None:
            shown = earlier.answer if earlier is not None else "(No answer was kept.)"
            show_markdown(f"{note}\n\n{shown}")
            return RERUN_SUMMARY.format(answer=shown)
        assert model is not None
        headless_store.save(source, list(kept.steps), KeptAnswer(
            answer, model.id, notebook, outputs, headless_store.now()))
        return RERUN_SUMMARY.format(answer=answer)

    def _run_steps(self, steps: Sequence[str]) -> list[CodeResult] | None:
        """Run each step inline, in order; None (after saying so) when one fails now."""
        from jupyter_ci.kernel.executor import ShellExecutor

        journal = Journal([InlineView(AskInfo("replay", self.prompt, "", self.cell_id))])
        # With its working folder, as in the ask, so files written count the same.
        executor = ShellExecutor(self.shell, on_output=journal.output, passthrough=False,
                                 workdir=_cwd())
        results = []
        for number, code in enumerate(steps, 1):
            run = RunCode(code, number, 1, f"replay-{number}", self.limits.timeout)
            journal.emit(StepStarted(run))
            result = executor.run(code, self.limits.timeout)
            journal.emit(StepEnded(run, result))
            if not result.ok:
                show_markdown(REPLAY_FAILED_NOTE.format(step=number))
                return None
            results.append(result)
        return results

    def _reanswer(self, model: ChatModel, steps: Sequence[str], results: list[CodeResult],
                  why: str) -> str | None:
        """Ask the model once for the answer from this run's outputs; None if it gave none."""
        from jupyter_ci.models.recording import RecordingModel

        if isinstance(model, RecordingModel):
            model = model.inner  # a recording is of an ask, not of this one turn
        request = reanswer_request(self.prompt, [
            (code, output_text(result, self.limits, self.redact))
            for code, result in zip(steps, results, strict=True)], self.limits)
        live = LiveMarkdown()
        try:
            reply = model.complete(request, live.append)
        except KeyboardInterrupt:
            raise AskInterrupted("The ask was interrupted while the model answered.",
                                 "The steps above ran; run the cell again for the answer."
                                 ) from None
        answer = reanswer_text(reply)
        if not answer:
            live.set("")
            return None
        live.set(answer)
        show_markdown(REANSWERED_NOTE.format(model=model.id, why=why))
        return answer


def _cwd() -> Path | None:
    try:
        return Path.cwd()
    except OSError:  # deleted under the kernel
        return None


def _closest(answers: Sequence[KeptAnswer], notebook: str) -> KeptAnswer | None:
    """Return the newest kept answer written in this notebook, else the newest of all."""
    mine = [a for a in answers if a.notebook == notebook] or list(answers)
    return mine[-1] if mine else None
