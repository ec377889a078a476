"""The %ask / %%ask magic: one ask, driven synchronously on the kernel's main thread."""

from __future__ import annotations

import importlib
import os
import re
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, line_cell_magic, magics_class

from jupyter_ci import secret_rules
from jupyter_ci.agent.approval import ApprovalMode
from jupyter_ci.agent.control import cells_section
from jupyter_ci.agent.cost import price_table
from jupyter_ci.agent.disclosure import request_parts
from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.events import Journal, Outcome
from jupyter_ci.agent.lifecycle import AskLife
from jupyter_ci.agent.loop import AskLoop, CallModel, Limits
from jupyter_ci.agent.memory import Memory
from jupyter_ci.agent.prompts import system_prompt
from jupyter_ci.agent.secrets import Redactor
from jupyter_ci.agent.types import CodeResult
from jupyter_ci.config import JupyterCI
from jupyter_ci.kernel import headless_store, rerun, reuse, safe_markdown
from jupyter_ci.kernel.answer_links import link_files
from jupyter_ci.kernel.context import environment_section
from jupyter_ci.kernel.headless_cells import headless_cells
from jupyter_ci.kernel.history import running_count
from jupyter_ci.kernel.instructions import standing_instructions
from jupyter_ci.kernel.options import AskOptions, help_text, parse_options
from jupyter_ci.kernel.protocol import (
    AskInfo,
    RequestInfo,
    current_record,
    current_request,
    notebook_cells,
)
from jupyter_ci.kernel.questions import StdinQuestions, approval_mode, refuse_unanswerable
from jupyter_ci.kernel.record import prompt_hash
from jupyter_ci.kernel.restart_check import (
    AskAbove,
    RanAsk,
    defined_above,
    kernel_only,
    restart_check,
    restart_notice,
    restart_problems,
    up_to_date,
)
from jupyter_ci.kernel.views import InlineView, show_markdown, show_sent
from jupyter_ci.models import retiring
from jupyter_ci.models.base import ChatModel, SeesImages
from jupyter_ci.models.broker import own_credentials, refreshed_environ
from jupyter_ci.models.resolve import resolve_model
from jupyter_ci.wire.events import Notice
from jupyter_ci.wire.names import BOXED_VARIABLE

#: Kernel-only names listed for the model at most.
MAX_KERNEL_ONLY = 40
#: Said once per unboxed kernel, at its first ask.
UNBOXED_NOTE = ("This kernel is not in a box: the code an ask runs here has all your rights "
                "(your files, ~/.ssh and other secrets, the network). To box it, run the "
                "command 'Run this notebook boxed' in JupyterLab, or pick the kernel 'Python 3 "
                "(sandboxed)' (docs/security.md).")


@magics_class
class AskMagics(Magics):
    """Holds the settings and the conversation memory of one kernel."""

    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell)
        self.ipython = shell  # Magics.shell is Optional; an ask always has its shell
        self.settings = JupyterCI(parent=shell)
        # So `%config JupyterCI.install = "always"` reaches it, like any IPython setting
        # (IPython annotates the list as shells only).
        configurables: list[Any] = shell.configurables
        configurables.append(self.settings)
        self.memory = Memory(self.settings.memory_tokens)
        #: Asks whose generated cells the browser deleted on a re-ask.
        self.replaced_asks: set[str] = set()
        #: The last ask this kernel ran from each ask cell (by cell id), and its cells' code.
        self.ran_asks: dict[str, RanAsk] = {}
        #: Whether this kernel's first ask said the kernel is not boxed.
        self.told_unboxed = False

    @line_cell_magic
    def ask(self, line: str, cell: str | None = None) -> None:
        """Ask the model to do something with code run in this kernel (help: options.help_text)."""
        opts = parse_options(line, cell)
        info = current_request(self.ipython)  # read once: what this cell's request carries
        if opts.dry_run:
            self._dry_run(opts, info)
            return
        phash = prompt_hash(opts.prompt, opts.model)
        if not opts.refresh and self._reuse(opts, info, phash):
            return
        headless = info.source if not info.has_frontend else None
        self._check_approval(opts, info)
        if headless is not None and not opts.refresh and self._replay(opts, info, headless):
            return
        if headless is not None and opts.refresh and opts.pin:
            show_markdown(reuse.REFRESH_PINNED_NOTE)
        model = self._resolve(opts.model)
        if opts.new:
            self.memory.clear()
        ask = AskInfo(uuid.uuid4().hex[:12], opts.prompt, model.id, info.cell_id,
                      info.record_ask_id, running_count(self.ipython),
                      info.frontend.path if info.frontend is not None else None)
        self._ask(opts, ask, model, phash, info, headless)

    def _ask(self, opts: AskOptions, ask: AskInfo, model: ChatModel, phash: str,
             info: RequestInfo, headless: str | None = None) -> None:
        loop, above = self._new_loop(opts, info, model, headless is not None)
        if ask.replace_ask_id:
            self.replaced_asks.add(ask.replace_ask_id)
        folder = working_folder()  # before a step changes directory
        journal = self._journal(ask, phash, info.has_frontend, opts.show_context)
        life = AskLife(ask.ask_id, ask.prompt, model.id, loop, journal, self.memory)
        life.start(retiring.note(model.id), self._unboxed_note())
        results: dict[str, CodeResult] = {}
        outcome = self._drive(life, model, folder, results)
        self._ran(info, ask, loop)
        if outcome.error is not None:
            life.end(outcome)
            raise outcome.error from None
        if folder is not None:
            # Shown (and recorded) with the files it mentions as links; remembered as written.
            outcome = replace(outcome, answer=link_files(outcome.answer, folder))
        self._restart_notice(above, loop, journal)
        life.end(outcome)
        if headless is not None and loop.unresolved is None:
            # The next headless run of this cell replays these steps instead of asking.
            rerun.keep(headless, model.id, outcome.answer, loop.succeeded, results,
                       loop.limits, loop.redact or str)

    def _unboxed_note(self) -> str | None:
        """Say, at this kernel's first ask, that it is not boxed (None: boxed, or said)."""
        if self.told_unboxed or os.environ.get(BOXED_VARIABLE):
            return None
        self.told_unboxed = True
        return UNBOXED_NOTE

    def _restart_notice(self, above: frozenset[str] | None, loop: AskLoop,
                        journal: Journal) -> None:
        """Warn when a step left failing would also fail after a restart."""
        # The loop checked before it called the ask done; a step left failing skipped that.
        if above is not None and loop.unresolved is not None and not loop.unresolved.names:
            problems = restart_problems(above, loop.succeeded, self.ipython.transform_cell,
                                        self.ipython.user_ns_hidden)
            if problems:
                journal.emit(Notice(restart_notice(problems)))

    def _ran(self, info: RequestInfo, ask: AskInfo, loop: AskLoop) -> None:
        """Remember the cells an ask left, for a later ask's stale `above` (Run All)."""
        if info.has_frontend and info.cell_id:
            self.ran_asks[info.cell_id] = RanAsk(
                ask.ask_id, tuple(loop.cells[step] for step in sorted(loop.cells)))

    @staticmethod
    def _journal(ask: AskInfo, phash: str, has_frontend: bool, show_context: bool) -> Journal:
        """The ask's journal and its encoders: the cell alone, or the cell and the comm."""
        journal = Journal()
        if not has_frontend:
            journal.encoders.append(InlineView(ask, show_context))
            return journal
        from jupyter_ci.kernel.comm import CommEncoder
        from jupyter_ci.kernel.frontend import LogView

        cell = LogView(ask, show_context)
        journal.encoders += [cell, CommEncoder(ask, phash, journal, cell.log.snapshot)]
        return journal

    def _new_loop(self, opts: AskOptions, info: RequestInfo, model: SeesImages | None,
                  headless: bool = False) -> tuple[AskLoop, frozenset[str] | None]:
        """Build the ask's loop, its context collected and redacted; also the names above."""
        from jupyter_ci.kernel.context import collect_context

        # The same redaction for the context and every tool result; the kernel's own
        # credentials are always among what it replaces.
        redactor = Redactor(own_credentials(os.environ))
        above = self._defined_above(info, headless)
        context = redactor(collect_context(self.ipython, self.settings.context_tokens,
                                           prompt=opts.prompt)
                           + self._kernel_only_note(above))
        install = self.settings.install_policy(can_ask=self._can_ask(info))
        history = [] if opts.new else self.memory.messages()
        check = None if above is None else restart_check(
            above, self.ipython.transform_cell, self.ipython.user_ns_hidden)
        cells = notebook_cells(info) if info.has_frontend else (
            headless_cells(info.source, Path.cwd()) if headless and info.source else [])
        instructions = redactor(standing_instructions(self.settings.instructions,
                                                      working_folder()))
        return AskLoop(opts.prompt, context=context + redactor(cells_section(cells)),
                       history=history, limits=self._limits(opts, model), redact=redactor,
                       install=install, check=check, approval=self._approval(opts),
                       cells=cells, system=system_prompt(instructions)), above

    def _dry_run(self, opts: AskOptions, info: RequestInfo) -> None:
        """Show what the ask would send; call no model, run nothing, remember nothing."""
        model: ChatModel | None = None
        try:
            model = self._resolve(opts.model)
        except AskError as exc:
            said = f"no model ({exc.message})"
        else:
            said = model.id
        first = self._new_loop(opts, info, model)[0].start()
        assert isinstance(first, CallModel), "an ask begins with a model call"
        show_sent(said, request_parts(first.request), dry_run=True)

    def _replay(self, opts: AskOptions, info: RequestInfo, source: str) -> bool:
        """Headless: run the steps an earlier headless run of this cell kept, not the model."""
        kept = headless_store.load(source)
        if kept is None:
            return False
        replay = rerun.Replay(self.ipython, opts.prompt, self._limits(opts, None),
                              Redactor(own_credentials(os.environ)), info.cell_id)
        summary = replay.run(source, kept, lambda: self._resolve(opts.model))
        if summary is None:
            return False
        self.memory.remember_summary(opts.prompt, summary)
        return True

    def _defined_above(self, info: RequestInfo, headless: bool) -> frozenset[str] | None:
        """Return the names the code above the ask defines, as it is now, when known."""
        if not info.has_frontend:
            # Headless runners run the cells above top to bottom in a new kernel: what they
            # defined is what a restart defines again.
            return frozenset(self.ipython.user_ns) if headless else None
        frontend = info.frontend
        if frontend is None or frontend.above is None:
            return None
        # Run All queued this request before the asks above placed their steps.
        asks = [AskAbove(a.cell_id, a.ask_id, a.cells) for a in frontend.asks_above]
        sources = up_to_date(frontend.above, asks, self.ran_asks)
        return defined_above(sources, self.ipython.transform_cell)

    def _kernel_only_note(self, above: frozenset[str] | None) -> str:
        """Tell the model which of the kernel's names no cell above defines."""
        if above is None:
            return ""
        names = kernel_only(self.ipython.user_ns, above, self.ipython.user_ns_hidden)
        if not names:
            return ""
        shown = ", ".join(names[:MAX_KERNEL_ONLY]) + (" …" if len(names) > MAX_KERNEL_ONLY
                                                          else "")
        # A section of its own, so --show-context names it (disclosure.py cuts at `## `).
        return ("\n\n## Names only in this kernel\n"
                "Only in this kernel, defined by no cell above this ask (cells that made "
                f"them were replaced or deleted, so a restart loses them): {shown}. A step "
                "that uses one of them must define it again (load or compute it), so the "
                "notebook still runs top to bottom after a restart.")

    def _drive(self, life: AskLife, model: ChatModel, folder: Path | None,
               results: dict[str, CodeResult]) -> Outcome:
        """Drive the ask in this kernel: its steps run here, its questions go to stdin."""
        from jupyter_ci.kernel.executor import ShellExecutor

        executor = rerun.KeepResults(ShellExecutor(
            self.ipython, on_output=life.journal.output, passthrough=False, workdir=folder),
            results)
        stdin = StdinQuestions(self.ipython)
        decide = stdin.decide if self._can_ask(current_request(self.ipython)) else None
        meter = price_table(self.settings.prices).meter(model.id)  # tokens and cost
        return life.drive(model, executor, confirm=stdin.confirm, decide=decide, price=meter)

    def _can_ask(self, info: RequestInfo) -> bool:
        """Tell whether someone can answer a question on stdin during this request."""
        if getattr(self.ipython, "kernel", None) is None:  # plain IPython: a terminal answers
            return sys.stdin is not None and sys.stdin.isatty()
        return info.allow_stdin

    def _approval(self, opts: AskOptions) -> ApprovalMode:
        return approval_mode(opts.approve, self.settings.approval)

    def _check_approval(self, opts: AskOptions, info: RequestInfo) -> None:
        refuse_unanswerable(self._approval(opts), self._can_ask(info))

    def _reuse(self, opts: AskOptions, info: RequestInfo, phash: str) -> bool:
        """Show the recorded answer instead of asking, when the notebook holds one."""
        return reuse.reuse(opts, info, phash, self.ipython.user_ns, self.memory)

    def _limits(self, opts: AskOptions, model: SeesImages | None) -> Limits:
        return self.settings.limits(model, opts.max_steps, opts.max_fixes, opts.timeout)

    def _resolve(self, spec: str | None) -> ChatModel:
        """Resolve the ask's model; behind a broker, ask it first what it serves now.

        A key pasted in the panel after the kernel started is known only to the broker;
        what it says is kept in this kernel's environment, so later asks need not ask again.
        """
        settings = self.settings.model_settings()
        env = refreshed_environ(spec or settings.default, os.environ)
        os.environ.update({k: v for k, v in env.items() if os.environ.get(k) != v})
        return resolve_model(spec, settings, os.environ)


# `%%ask?` shows the parser's own usage and option help, so they cannot drift apart.
AskMagics.ask.__doc__ = help_text()


def register(ipython: Any) -> None:
    """Register the magics once per shell, and the skipping of replaced generated cells."""
    if "ask" in ipython.magics_manager.magics["cell"]:
        return
    magics = AskMagics(ipython)
    ipython.register_magics(magics)
    importlib.import_module("jupyter_ci.kernel.structured.install").install(ipython)
    ready_for_the_first_ask()
    ipython.input_transformers_cleanup.append(StaleCellSkipper(magics))
    ipython.input_transformers_cleanup.append(question_prompts)
    importlib.import_module("jupyter_ci.kernel.external").install(ipython)


#: What every ask loads that `%load_ext` does not need: loaded with it (~15 ms), so the first
#: ask of a Run All costs what the next ones do. No SDK: under a server none loads at all.
ASK_PATH = ("jupyter_ci.kernel.variables",
            "jupyter_ci.kernel.executor", "jupyter_ci.kernel.previews", "jupyter_ci.workdir",
            "jupyter_ci.kernel.notebook_path", "jupyter_ci.models.service",
            "jupyter_core.paths", "nh3")


def ready_for_the_first_ask() -> None:
    """Load the ask's modules, its Markdown renderer and the cached redaction rules."""
    for name in ASK_PATH:
        importlib.import_module(name)
    safe_markdown.to_html("*ready*")  # mistune's and nh3's first call builds their tables
    environment_section()  # reads the data libraries' versions once (a folder scan)
    # From the cache only: detect-secrets itself (~80 ms) waits for an ask that needs it.
    if secret_rules.cached():
        Redactor()("ready: password=ready")


_LINE_ASK = re.compile(r"^(?P<indent>[ \t]*)%ask[ \t]+(?P<prompt>\S.*?)[ \t]*$")


def question_prompts(lines: list[str]) -> list[str]:
    """Keep a `%ask ...?` line a prompt: IPython reads a trailing `word?` as a help request."""
    # Without this, `%ask Which month was best, and by how much?` prints "Object `much` not
    # found." (IPython's HelpEnd). Turned into the call the line magic would have become, it
    # keeps the whole line; in every frontend, since the kernel does it. %%ask cells are left
    # to IPython's cell-magic transform: their prompt is never read as Python.
    if lines and lines[0].lstrip().startswith("%%"):
        return lines
    out = []
    for line in lines:
        found = _LINE_ASK.match(line.rstrip("\n"))
        if found and found["prompt"].endswith("?") and found["prompt"] != "?":
            line = (f"{found['indent']}get_ipython().run_line_magic('ask', "
                    f"{found['prompt']!r})" + ("\n" if line.endswith("\n") else ""))
        out.append(line)
    return out


class StaleCellSkipper:
    """Turn a generated cell of a replaced ask into a no-op.

    Run All sends every cell up front: when an edited %%ask cell re-asks and the browser
    deletes that ask's old generated cells, their execute_requests are already queued.
    """

    def __init__(self, magics: AskMagics) -> None:
        self.magics = magics

    def __call__(self, lines: list[str]) -> list[str]:
        """Return the cell's lines, or a line saying it was skipped (its ask was replaced)."""
        if not self.magics.replaced_asks:
            return lines
        record = current_record(self.magics.ipython)
        # Generated cells carry a step; the re-asking %%ask cell itself does not.
        if record is not None and "step" in record and (
                record.get("ask_id") in self.magics.replaced_asks):
            return ["print('jupyter-ci: skipped: this cell belongs to an ask that was asked "
                    "again; the new answer is in the cells below the %%ask cell.')\n"]
        return lines


def working_folder() -> Path | None:
    """Return the kernel's working folder (where a notebook's kernel starts), if it exists."""
    try:
        return Path.cwd()
    except OSError:  # deleted under the kernel
        return None
