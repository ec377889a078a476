"""The ask loop as a state machine with no I/O: it says what to do next and is fed results."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from jupyter_ci.agent import install as packages
from jupyter_ci.agent.actions import (
    Action,
    ApprovePlan,
    ApproveStep,
    CallModel,
    ConfirmInstall,
    Fail,
    Finish,
    Limits,
    ReviewEdits,
    RunCode,
    StepKind,
    Unresolved,
)
from jupyter_ci.agent.answers import UserAnswers
from jupyter_ci.agent.approval import (
    ApprovalMode,
    NotebookCell,
    edits_question,
    step_question,
)
from jupyter_ci.agent.control import (
    edited_note,
    parse_arguments,
    proposed_section,
)
from jupyter_ci.agent.errors import (
    AskError,
    AskInterrupted,
    KernelDied,
    LimitReached,
)
from jupyter_ci.agent.feedback import Redact, format_error, invalid_call, not_run, tool_result
from jupyter_ci.agent.images import ImagePicker
from jupyter_ci.agent.prompts import (
    EDIT_CELL,
    EDIT_TOOL,
    PLAN_PROMPT,
    RUN_PYTHON,
    SYSTEM_PROMPT,
    user_message,
)
from jupyter_ci.agent.restart import RestartCheck, RestartProblem, restart_message
from jupyter_ci.agent.types import (
    CodeResult,
    Message,
    ModelReply,
    ModelRequest,
    ToolCall,
    ToolResult,
)
from jupyter_ci.wire.frozen import frozen


@frozen
class _Missing:
    """A run that failed for want of a package, held while the package is installed."""

    run: RunCode
    result: CodeResult
    install: packages.Install


__all__ = ["Action", "ApprovePlan", "ApproveStep", "AskLoop", "CallModel", "ConfirmInstall",
           "Fail", "Finish", "Limits", "ReviewEdits", "RunCode", "StepKind", "Unresolved",
           "parse_arguments"]


class AskLoop(UserAnswers):
    """Drive one ask: model turns, code runs, limits; the caller does all I/O."""

    tool_calls_made = 0
    failures_in_a_row = 0
    tokens_used = 0
    step = 0
    attempt = 0
    last_error = ""
    answer: str | None = None
    #: Set when the model answers without fixing the step that failed last.
    unresolved: Unresolved | None = None
    #: The step being made self-contained, and how often the check sent the model back.
    _redo: int | None = None
    _restart_asks = 0
    _running: RunCode | None = None
    _missing: _Missing | None = None

    def __init__(
        self,
        prompt: str,
        *,
        context: str = "",
        history: Sequence[Message] = (),
        limits: Limits | None = None,
        system: str = SYSTEM_PROMPT,
        redact: Redact | None = None,
        install: packages.InstallPolicy | None = None,
        check: RestartCheck | None = None,
        approval: ApprovalMode = "never",
        cells: Sequence[NotebookCell] = (),
    ) -> None:
        self.limits = limits or Limits()
        self.install = install or packages.InstallPolicy()
        self.system = system
        #: Applied to every tool result before the model sees it.
        self.redact = redact
        self.history = tuple(history)
        self.prompt = prompt
        self.messages: list[Message] = [Message("user", user_message(prompt, context))]
        #: (step, code) of each successful run, in order: what the notebook keeps.
        self.succeeded: list[tuple[int, str]] = []
        #: Code of the attempts that failed: what the notebook does not keep.
        self.failed_code: list[str] = []
        #: Says which kept steps would fail after a restart; run before the ask is done.
        self.check = check
        #: The code each step's cell holds now: its last attempt's.
        self.cells: dict[int, str] = {}
        self._attempts: dict[int, int] = {}
        #: Chooses each run's images for the model, within the ask's cap.
        self.images = ImagePicker(self.limits.vision)
        self._pending: deque[ToolCall] = deque()
        #: Normalised package name -> what became of installing it in this ask.
        self._tried: dict[str, str] = {}
        self._init_answers(approval, cells)

    def start(self) -> Action:
        """Return the first action: ask the model."""
        return self._call_model()

    def on_reply(self, reply: ModelReply) -> Action:
        """Take the model's turn and decide what comes next."""
        self.tokens_used += reply.input_tokens + reply.output_tokens
        self.messages.append(Message("assistant", reply.text, tool_calls=reply.tool_calls))
        if self._planning:
            return self._plan(reply)
        if not reply.tool_calls:
            return self._answered(reply.text)
        if self.tokens_used > self.limits.max_tokens:
            return self._fail(LimitReached(
                f"The ask used {self.tokens_used:,} tokens, over its limit of "
                f"{self.limits.max_tokens:,}.",
                "Ask for less at a time, or raise JupyterCI.max_ask_tokens.",
            ))
        self._pending.extend(reply.tool_calls)
        return self._next_call()

    def _answered(self, text: str) -> Action:
        """Finish, unless a kept step would fail after a restart and fixes are left."""
        answer = text.strip() or "(The model finished without an answer.)"
        if self.failures_in_a_row and self.step:
            self.unresolved = Unresolved(self._redo or self.step, self.last_error)
        elif (problem := self._restart_problem()) is not None:
            # Like a failed run, within the fix budget: the last one ends the ask unresolved.
            if self._restart_asks + 1 < self.limits.max_fixes:
                self._restart_asks += 1
                self._redo = problem.step
                self.messages.append(Message("user", restart_message(problem)))
                return replace(self._call_model(), restart=problem)
            self.unresolved = Unresolved(problem.step, problem.reason(), problem.names)
        answer += proposed_section([edit for edit, said in self.edits if said == "proposed"])
        self.answer = answer
        return Finish(answer)

    def _restart_problem(self) -> RestartProblem | None:
        if self.check is None or not self.succeeded:
            return None
        problems = self.check(tuple(self.succeeded), tuple(self.failed_code))
        return problems[0] if problems else None

    def on_result(self, result: CodeResult) -> Action:
        """Take the outcome of the code run asked for by the last `RunCode`."""
        running = self._running
        assert running is not None, "on_result without a RunCode"
        self._running = None
        if running.kind == "install":
            return self._installed(running, result)
        note = ""
        if running.kind == "code" and result.status == "error":
            verdict = self._missing_package(running, result)
            if not isinstance(verdict, str):
                return verdict
            note = verdict
        elif running.kind == "retry" and self._missing is not None:
            missing, self._missing = self._missing, None
            note = packages.installed_note(missing.install.module, running.package,
                                           running.step - 1, running.step)
        return self._finish_run(running, result, note)

    def on_install_answer(self, approved: bool) -> Action:
        """Take the user's answer to a `ConfirmInstall`."""
        missing = self._missing
        assert missing is not None, "on_install_answer without a ConfirmInstall"
        if approved:
            return self._install_step(missing)
        self._missing = None
        self._tried[packages.normalise(missing.install.package)] = "declined by the user"
        return self._finish_run(missing.run, missing.result, packages.failed_note(
            missing.install.module, missing.install.package, "the user declined"))

    def _missing_package(self, running: RunCode, result: CodeResult) -> Action | str:
        """Start installing a missing package, or return the note for the model (maybe "")."""
        module = packages.missing_module(result.error)
        # An install would take the place of the step being made self-contained: not then.
        verdict = None if module is None or self._redo is not None else packages.decide(
            module, self.install, self._tried)
        if verdict is None:
            return ""
        if isinstance(verdict, packages.Refuse):
            return verdict.note
        self._missing = _Missing(running, result, verdict)
        if verdict.ask:
            return ConfirmInstall(verdict.package, packages.question(verdict))
        return self._install_step(self._missing)

    def _install_step(self, missing: _Missing) -> RunCode:
        """Run `%pip install` as the next attempt of the failed step: its cell becomes it."""
        code = packages.install_code(missing.install.package)
        self._running = RunCode(
            code, missing.run.step, self._number(missing.run.step, code),
            missing.run.call_id, max(self.limits.timeout, packages.INSTALL_TIMEOUT),
            kind="install", package=missing.install.package)
        return self._running

    def _installed(self, run: RunCode, result: CodeResult) -> Action:
        """After an install: run the failed code again as a new step, or tell the model."""
        missing = self._missing
        assert missing is not None, "an install step without a missing package"
        key = packages.normalise(run.package)
        if result.ok:
            self._tried[key] = "installed, yet the import still failed"
            self.succeeded.append((run.step, run.code))
            self.step += 1
            self._running = replace(missing.run, step=self.step,
                                    attempt=self._number(self.step, missing.run.code),
                                    kind="retry", package=run.package)
            return self._running
        self._missing = None
        self._tried[key] = "not installed by pip"
        if result.status in ("interrupted", "died"):
            return self._finish_run(run, result, "")
        why = format_error(result.error).splitlines()[0] if result.error else result.status
        self._tool_result(run.call_id, tool_result(
            missing.result, self.limits.timeout, self.limits.max_output_chars, self.redact,
            note=packages.failed_note(missing.install.module, run.package, why)))
        self.last_error = why
        return self._count_failure() or self._next_call()

    def _finish_run(self, running: RunCode, result: CodeResult, note: str) -> Action:
        """Tell the model how the run went, then go on, fix, or end the ask."""
        edited = self._edited.pop(running.call_id, "")
        note = "\n".join(part for part in (edited_note(edited) if edited else "", note) if part)
        self._tool_result(running.call_id, tool_result(
            result, self.limits.timeout, self.limits.max_output_chars, self.redact,
            self.images, self.limits.max_tokens - self.tokens_used, note=note))
        if result.status == "interrupted":
            return self._fail(AskInterrupted(
                f"The ask was interrupted during step {running.step}.",
                "Cells run so far keep their results. Run the cell again to start over.",
            ))
        if result.status == "died":
            return self._fail(KernelDied(
                f"The kernel died while running step {running.step}.",
                "Restart the kernel; its variables are lost.",
            ))
        if result.ok:
            self.failures_in_a_row = 0
            self._keep(running)
            return self._next_call()
        self.failed_code.append(running.code)
        if result.status == "timeout":
            self.last_error = f"timed out after {self.limits.timeout:g} s"
        elif result.error is not None:
            self.last_error = format_error(result.error).splitlines()[0]
        return self._count_failure() or self._next_call()

    def _keep(self, run: RunCode) -> None:
        """Keep a successful run's code as its step's; a redone step keeps its place."""
        if run.step == self._redo:
            self._redo = None
            self.succeeded = [(step, run.code if step == run.step else code)
                              for step, code in self.succeeded]
            if any(step == run.step for step, _ in self.succeeded):
                return
        self.succeeded.append((run.step, run.code))

    def _number(self, step: int, code: str) -> int:
        """Count an attempt of `step` whose code is `code`; return its number."""
        self.attempt = self._attempts.get(step, 0) + 1
        self._attempts[step] = self.attempt
        self.cells[step] = code
        return self.attempt

    def transcript(self) -> list[Message]:
        """Return this ask's messages (user prompt, model turns, tool results)."""
        return list(self.messages)

    def _call_model(self) -> CallModel:
        tools = (RUN_PYTHON, EDIT_CELL) if self.notebook_cells else (RUN_PYTHON,)
        request = ModelRequest(
            system=self.system + PLAN_PROMPT if self._planning else self.system,
            messages=(*self.history, *self.messages),
            tools=tools,
            max_tokens=self.limits.max_reply_tokens,
            prompt=self.prompt,
        )
        return CallModel(request)

    def _next_call(self) -> Action:
        while self._pending or self._proposed:
            # Edits one reply proposes are reviewed together, before its next code runs.
            if self._proposed and (not self._pending or self._pending[0].name != EDIT_TOOL):
                return ReviewEdits(tuple(self._proposed), edits_question(len(self._proposed)))
            if self.tool_calls_made >= self.limits.max_steps:
                return self._fail(LimitReached(
                    f"The ask reached its limit of {self.limits.max_steps} steps "
                    "before the model finished.",
                    "Split the task into smaller asks, or raise it with --max-steps.",
                ))
            call = self._pending.popleft()
            self.tool_calls_made += 1
            action = (self._edit(call) if call.name == EDIT_TOOL and self.notebook_cells
                      else self._run(call))
            if action is not None:
                return action
        return self._call_model()

    def _run(self, call: ToolCall) -> Action | None:
        """Run a run_python call's code, once approved when the ask asks first."""
        code, problem = parse_arguments(call)
        if problem:
            return self._invalid(call, problem)
        # A run after a failure fixes the same step, as does one the restart check asked
        # for; a run after success is a new step.
        new = self._redo is None and (self.failures_in_a_row == 0 or self.step == 0)
        step = self.step + 1 if new else (self._redo or self.step)
        run = RunCode(code, step, self._attempts.get(step, 0) + 1, call.id, self.limits.timeout)
        if self.approval == "each" or (self.approval == "first" and not self._approved_once):
            self._waiting = (run, new)
            return ApproveStep(run, step_question(step))
        return self._commit(run, new)

    def _commit(self, run: RunCode, new: bool) -> RunCode:
        """Count the step (and its attempt) that runs now."""
        if new:
            self.step += 1
        self._running = replace(run, attempt=self._number(run.step, run.code))
        return self._running

    def _invalid(self, call: ToolCall, problem: str) -> Fail | None:
        self._tool_result(call.id, invalid_call(problem))
        self.last_error = problem.splitlines()[0]
        return self._count_failure()

    def _count_failure(self) -> Fail | None:
        self.failures_in_a_row += 1
        if self.failures_in_a_row < self.limits.max_fixes:
            return None
        return self._fail(LimitReached(
            f"The model's code failed {self.failures_in_a_row} times in a row "
            f"(limit {self.limits.max_fixes}). Last error: {self.last_error}",
            "Fix the problem or rephrase the request, or allow more with --max-fixes.",
        ))

    def _tool_result(self, call_id: str, result: ToolResult) -> None:
        self.messages.append(Message.tool(call_id, result))

    def _fail(self, error: AskError) -> Fail:
        # Every tool call needs a result, or the transcript is invalid for a later ask.
        for call_id in [edit.call_id for edit in self._proposed] + [c.id for c in self._pending]:
            self._tool_result(call_id, not_run())
        self._pending.clear()
        self._proposed = []
        return Fail(error)
