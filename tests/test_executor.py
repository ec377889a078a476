"""ShellExecutor in real ipykernel kernels (and once in plain IPython, in a subprocess)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from jupyter_ci.kernel.executor import EXIT_HINT, INPUT_HINT

ROOT = Path(__file__).resolve().parents[1]
RESULT_MIME = "application/x.jupyter-ci-test+json"
OUTPUT_TYPES = {"stream", "display_data", "execute_result", "error"}

# Runs in the kernel: a cell magic, as %%ask is, that runs its body through ShellExecutor and
# publishes the CodeResult, what on_output saw, and whether run() put everything back.
SETUP = f"""
import builtins, dataclasses, getpass, signal, sys
from IPython.core.magic import register_cell_magic
from IPython.display import display
from jupyter_ci.kernel.executor import ShellExecutor

def _ci_state():
    shell = get_ipython()
    return [builtins.input, getpass.getpass, signal.getsignal(signal.SIGINT),
            vars(shell.kernel.session).get("send"), vars(shell).get("ask_exit"),
            vars(sys.stdout).get("write"), shell.exit_now]

@register_cell_magic
def ci_run(line, cell):
    timeout, passthrough = line.split()
    seen, before = [], _ci_state()
    def seen_event(e):
        seen.append({{"kind": e.kind, "output": e.output, "wait": e.wait,
                      "outputs": list(e.outputs)}})
    executor = ShellExecutor(get_ipython(), on_output=seen_event,
                             passthrough=passthrough == "True")
    result = executor.run(cell, float(timeout))
    restored = [a == b for a, b in zip(before, _ci_state())]
    display({{"{RESULT_MIME}": {{"result": dataclasses.asdict(result), "seen": seen,
                                "restored": restored}}}}, raw=True)
"""


@dataclass
class Run:
    """What one %%ci_run cell produced, seen from the client."""

    result: dict[str, Any]
    seen: list[dict[str, Any]]
    restored: list[bool]
    reply: dict[str, Any]
    iopub: list[dict[str, Any]] = field(default_factory=list)  # outputs the client received

    @property
    def outputs(self) -> list[dict[str, Any]]:
        """Return the captured outputs."""
        return list(self.result["outputs"])


@dataclass
class Kernel:
    """A running kernel and a client for it."""

    km: KernelManager
    kc: BlockingKernelClient

    def execute(self, code: str, timeout: float = 30) -> tuple[dict[str, Any], list[Any]]:
        """Run a cell; return the reply content and the IOPub messages of the request."""
        msgs: list[Any] = []
        reply = self.kc.execute_interactive(
            code, output_hook=msgs.append, allow_stdin=False, timeout=timeout
        )
        return reply["content"], msgs

    def ci_run(self, code: str, timeout: float = 10, passthrough: bool = True) -> Run:
        """Run `code` through ShellExecutor inside a cell magic."""
        reply, msgs = self.execute(f"%%ci_run {timeout} {passthrough}\n{code}", timeout + 30)
        found, iopub = None, []
        for msg in msgs:
            data = msg["content"].get("data", {})
            if msg["msg_type"] == "display_data" and RESULT_MIME in data:
                found = data[RESULT_MIME]
            elif msg["msg_type"] in OUTPUT_TYPES | {"update_display_data", "clear_output"}:
                iopub.append(msg)
        assert found is not None, (reply, msgs)
        return Run(found["result"], found["seen"], found["restored"], reply, iopub)

    def value(self, expr: str) -> str:
        """Evaluate `expr` in a plain cell and return its text/plain repr."""
        reply, msgs = self.execute(expr)
        assert reply["status"] == "ok", reply
        return str(next(m["content"]["data"]["text/plain"] for m in msgs
                        if m["msg_type"] == "execute_result"))


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """Start an ipykernel on this very interpreter (not whatever `python` is on PATH)."""
    specs = tmp_path_factory.mktemp("kernels")
    spec_dir = specs / "ci-test"
    spec_dir.mkdir()
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "ci-test", "language": "python"}))
    km = KernelManager(kernel_name="ci-test",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)]))
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    km.start_kernel(env={**os.environ, "PYTHONPATH": pythonpath},
                    cwd=str(specs))
    kc = km.blocking_client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        k = Kernel(km, kc)
        reply, _ = k.execute(SETUP)
        assert reply["status"] == "ok", reply
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def merged_iopub(run: Run) -> list[dict[str, Any]]:
    """Return the outputs the client received, as nbformat outputs with streams merged."""
    outputs: list[dict[str, Any]] = []
    for msg in run.iopub:
        if msg["msg_type"] not in OUTPUT_TYPES:
            continue
        out = dict(nbformat.v4.output_from_msg(msg))
        if outputs and out["output_type"] == outputs[-1]["output_type"] == "stream" and (
                out["name"] == outputs[-1]["name"]):
            outputs[-1] = {**outputs[-1], "text": outputs[-1]["text"] + out["text"]}
        else:
            outputs.append(out)
    return outputs


def assert_valid(outputs: list[dict[str, Any]]) -> None:
    """Check that the outputs make a valid nbformat v4 code cell."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=outputs)])
    nbformat.validate(nbformat.from_dict(nb))


def assert_ok(run: Run) -> None:
    """Check the run succeeded and that run() put back everything it replaced."""
    assert run.result["status"] == "ok", run.result
    assert all(run.restored), run.restored


def test_outputs_in_true_order(kernel: Kernel) -> None:
    run = kernel.ci_run(textwrap.dedent("""\
        import sys
        print("out1"); sys.stdout.flush()
        print("err1", file=sys.stderr); sys.stderr.flush()
        print("out2"); print("out3")
        6 * 7"""))
    assert_ok(run)
    count = run.result["execution_count"]
    assert run.outputs == [
        {"output_type": "stream", "name": "stdout", "text": "out1\n"},
        {"output_type": "stream", "name": "stderr", "text": "err1\n"},
        {"output_type": "stream", "name": "stdout", "text": "out2\nout3\n"},
        {"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {},
         "execution_count": count},
    ]
    assert merged_iopub(run) == run.outputs  # passthrough: the cell shows the same outputs
    assert [e["kind"] for e in run.seen] == ["add"] * 4
    assert [e["output"]["output_type"] for e in run.seen] == ["stream"] * 3 + ["execute_result"]
    assert run.result["error"] is None and run.result["duration_s"] > 0
    assert_valid(run.outputs)


def test_execution_count_and_history(kernel: Kernel) -> None:
    first = kernel.ci_run("value = 'first'\nvalue")
    second = kernel.ci_run("value * 2")
    assert second.result["execution_count"] == first.result["execution_count"] + 2
    count = second.result["execution_count"]
    assert kernel.value(f"In[{count}], Out[{count}]") == "('value * 2', 'firstfirst')"
    # The reply of the cell around the generated code reports the last generated count.
    assert second.reply["execution_count"] == count


def test_variables_persist_in_user_namespace(kernel: Kernel) -> None:
    assert_ok(kernel.ci_run("shared = [1]"))
    run = kernel.ci_run("shared.append(2)\nshared")
    assert_ok(run)
    assert run.outputs[-1]["data"]["text/plain"] == "[1, 2]"
    assert kernel.value("shared") == "[1, 2]"


def test_dataframe_has_html(kernel: Kernel) -> None:
    run = kernel.ci_run("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})")
    assert_ok(run)
    (result,) = run.outputs
    assert result["output_type"] == "execute_result"
    assert "<table" in result["data"]["text/html"] and "text/plain" in result["data"]
    assert_valid(run.outputs)


def test_matplotlib_figure_is_png(kernel: Kernel) -> None:
    run = kernel.ci_run("%matplotlib inline\nimport matplotlib.pyplot as plt\n"
                        "plt.plot([1, 3, 2])\nprint('drawn')")
    assert_ok(run)
    assert [o["output_type"] for o in run.outputs] == ["stream", "display_data"]
    png = base64.b64decode(run.outputs[1]["data"]["image/png"])
    assert png.startswith(b"\x89PNG")
    assert_valid(run.outputs)


def test_exception_is_reported_without_ansi(kernel: Kernel) -> None:
    run = kernel.ci_run("def f():\n    return 1 / 0\nf()")
    assert run.result["status"] == "error" and all(run.restored)
    error = run.result["error"]
    assert (error["ename"], error["evalue"]) == ("ZeroDivisionError", "division by zero")
    assert error["traceback"] and not any("\x1b" in line for line in error["traceback"])
    assert any("return 1 / 0" in line for line in error["traceback"])
    assert run.outputs[-1]["output_type"] == "error"
    assert "\x1b" in "".join(run.outputs[-1]["traceback"])  # the notebook keeps the colours
    assert_valid(run.outputs)


def test_failing_repr_fails_the_run_not_the_ask_cell(kernel: Kernel) -> None:
    run = kernel.ci_run("class Bad:\n    def _repr_html_(self):\n"
                        "        raise ValueError('bad repr')\nBad()")
    assert run.result["status"] == "error" and all(run.restored)
    assert run.result["error"]["ename"] == "ValueError"
    assert run.reply["status"] == "ok"  # the flag ipykernel reads was put back


def test_syntax_error(kernel: Kernel) -> None:
    run = kernel.ci_run("def f(:\n    pass")
    assert run.result["status"] == "error"
    assert run.result["error"]["ename"] == "SyntaxError"
    assert any("def f(:" in line for line in run.result["error"]["traceback"])


@pytest.mark.parametrize("code", ["while True:\n    pass", "import time\ntime.sleep(100)"])
def test_timeout_interrupts_and_keeps_kernel(kernel: Kernel, code: str) -> None:
    assert_ok(kernel.ci_run("kept = 'still here'"))
    started = time.monotonic()
    run = kernel.ci_run(code, timeout=1)
    assert time.monotonic() - started < 10
    assert run.result["status"] == "timeout" and all(run.restored)
    assert run.result["error"]["ename"] == "TimeoutError"
    assert 1 <= run.result["duration_s"] < 5
    assert kernel.km.is_alive()
    assert kernel.value("kept") == "'still here'"
    after = kernel.ci_run("kept.upper()")
    assert_ok(after)
    assert after.outputs[-1]["data"]["text/plain"] == "'STILL HERE'"


def test_user_interrupt_is_not_a_timeout(kernel: Kernel) -> None:
    timer = threading.Timer(0.5, kernel.km.interrupt_kernel)
    timer.start()
    run = kernel.ci_run("import time\ntime.sleep(30)", timeout=30)
    timer.join()
    assert run.result["status"] == "interrupted" and all(run.restored)
    assert run.result["duration_s"] < 10
    assert_ok(kernel.ci_run("1"))


def test_timer_never_fires_after_run_returned(kernel: Kernel) -> None:
    # Timeouts close to the run time; a late SIGINT would fail this cell or the next.
    code = textwrap.dedent("""\
        import random, time
        from jupyter_ci.kernel.executor import ShellExecutor
        ex = ShellExecutor(get_ipython(), passthrough=False)
        statuses = set()
        for i in range(150):
            result = ex.run("sum(range(20000))", random.uniform(0.0002, 0.003))
            statuses.add(result.status)
            deadline = time.monotonic() + 0.002
            while time.monotonic() < deadline:
                pass
        sorted(statuses)""")
    reply, msgs = kernel.execute(code)
    assert reply["status"] == "ok", reply
    assert not [m for m in msgs if m["msg_type"] == "error"]
    assert_ok(kernel.ci_run("'calm'"))


def test_one_timer_thread_and_a_shorter_timeout_after_longer_ones(kernel: Kernel) -> None:
    # The timer thread sleeps until the earliest deadline it holds: a shorter timeout than
    # those of the runs before must wake it, and no run starts a thread of its own.
    code = textwrap.dedent("""\
        import threading, time
        from jupyter_ci.kernel.executor import ShellExecutor
        ex = ShellExecutor(get_ipython(), passthrough=False)
        for i in range(5):
            ex.run("x = 1", 60)
        started = time.monotonic()
        short = ex.run("import time\\ntime.sleep(20)", 0.5)
        took = time.monotonic() - started
        timers = [t.name for t in threading.enumerate()].count("jupyter-ci-timeout")
        (short.status, took < 5, timers)""")
    assert kernel.value(code) == "('timeout', True, 1)"
    assert_ok(kernel.ci_run("'calm'"))


def test_own_displays_send_what_ipython_display_sends(kernel: Kernel) -> None:
    # LiveMarkdown builds its display messages itself (fewer waits for the IOPub thread):
    # they must be what IPython's display() and update_display() send.
    def shown(code: str) -> list[tuple[str, Any]]:
        reply, msgs = kernel.execute(code)
        assert reply["status"] == "ok", reply
        return [(m["msg_type"], m["content"]) for m in msgs
                if m["msg_type"] in ("display_data", "update_display_data")]

    setup = ("from jupyter_ci.kernel import views\n"
             "def _show(text_1, text_2):\n"
             "    v = views.LiveMarkdown(); v.set(text_1); v.set(text_2)\n"
             "    return v._handle.display_id\n")
    ours = shown(setup + "_id = _show('a *b*', 'c <img src=x onerror=1>')")
    ours_id = kernel.value("_id").strip("'")
    theirs = shown("_ours = views.show_own_display, views.update_own_display\n"
                   "views.show_own_display = lambda data: None\n"
                   "views.update_own_display = lambda data, display_id: False\n"
                   "_id = _show('a *b*', 'c <img src=x onerror=1>')\n"
                   "views.show_own_display, views.update_own_display = _ours")
    theirs_id = kernel.value("_id").strip("'")
    assert len(ours) == 2 and [kind for kind, _ in ours] == ["display_data", "update_display_data"]
    assert [(kind, {**content, "transient": {}}) for kind, content in ours] == [
        (kind, {**content, "transient": {}}) for kind, content in theirs]
    assert [content["transient"] for _, content in ours] == [{"display_id": ours_id}] * 2
    assert [content["transient"] for _, content in theirs] == [{"display_id": theirs_id}] * 2


@pytest.mark.parametrize("code", ["input('name? ')", "import getpass\ngetpass.getpass()"])
def test_input_raises_instead_of_hanging(kernel: Kernel, code: str) -> None:
    run = kernel.ci_run(code, timeout=20)
    assert run.result["status"] == "error" and all(run.restored)
    assert run.result["error"]["ename"] == "InputNotAvailableError"
    assert run.result["error"]["evalue"] == INPUT_HINT


@pytest.mark.parametrize("code", ["import sys\nsys.exit(3)", "exit()", "quit()",
                                  "raise SystemExit"])
def test_exit_does_not_stop_the_kernel(kernel: Kernel, code: str) -> None:
    run = kernel.ci_run(code)
    assert run.result["status"] == "error" and all(run.restored)
    assert run.result["error"]["ename"] == "SystemExit"
    assert EXIT_HINT in run.result["error"]["evalue"]
    assert not run.reply.get("payload")  # no ask_exit payload reaches the frontend
    time.sleep(0.3)  # ipykernel stops its loop 0.1 s after exit_now is set
    assert kernel.km.is_alive()
    assert kernel.value("'alive'") == "'alive'"


def test_passthrough_false_swallows_outputs(kernel: Kernel) -> None:
    code = "from IPython.display import display\nprint('p')\ndisplay('d')\n1 / 0"
    quiet = kernel.ci_run(code, passthrough=False)
    assert quiet.iopub == []
    assert [o["output_type"] for o in quiet.outputs] == ["stream", "display_data", "error"]
    assert quiet.reply["status"] == "ok" and all(quiet.restored)
    loud = kernel.ci_run(code, passthrough=True)
    # ipykernel 6 may flush print()'s "p" before the display and its "\n" after it.
    shown = [o for o in merged_iopub(loud) if o["output_type"] != "stream" or o["text"].strip()]
    assert [o["output_type"] for o in shown] == ["stream", "display_data", "error"], shown


def test_update_display_and_clear_output(kernel: Kernel) -> None:
    run = kernel.ci_run(textwrap.dedent("""\
        from IPython.display import display, clear_output
        print("gone")
        clear_output()
        handle = display("one", display_id=True)
        print("kept")
        handle.update("two")"""))
    assert_ok(run)
    assert [(o["output_type"], o.get("text") or o["data"]["text/plain"]) for o in run.outputs] \
        == [("display_data", "'two'"), ("stream", "kept\n")]
    assert [e["kind"] for e in run.seen] == ["add", "clear", "add", "add", "replace"]
    # The update comes with the whole list as it now is: the views keep no copy.
    assert [o.get("text") or o["data"]["text/plain"] for o in run.seen[-1]["outputs"]] == [
        "'two'", "kept\n"]


PLAIN_IPYTHON = """
import dataclasses, json, sys
from IPython.core.interactiveshell import InteractiveShell
from jupyter_ci.kernel.executor import ShellExecutor
shell = InteractiveShell.instance()
code = "import sys\\nprint('a')\\nprint('b', file=sys.stderr)\\nx = 40\\nx + 2"
results = [ShellExecutor(shell, passthrough=False).run(c, 1.0)
           for c in (code, "1/0", "import time; time.sleep(60)", "x")]
sys.__stderr__.write(json.dumps([dataclasses.asdict(r) for r in results]))
"""


def test_plain_ipython_without_kernel() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PLAIN_IPYTHON], capture_output=True,
                          text=True, env=env, timeout=60, check=True)
    assert proc.stdout == ""  # passthrough=False: nothing reached the terminal
    ok, error, timeout, later = json.loads(proc.stderr)
    assert [(o["output_type"], o.get("name")) for o in ok["outputs"]] == [
        ("stream", "stdout"), ("stream", "stderr"), ("execute_result", None)]
    assert ok["outputs"][2]["data"]["text/plain"] == "42"
    assert error["error"]["ename"] == "ZeroDivisionError"
    assert timeout["status"] == "timeout"
    assert later["status"] == "ok" and later["outputs"][0]["data"]["text/plain"] == "40"
