"""Measure the wire codec against the hand-written encoders it replaced, and `%load_ext`.

Prints ratios, not pass/fail: these machines are noisy, so both sides run in the same
process (or in kernels started alternately), interleaved.

    python bench/bench_wire.py [--rounds 9] [--kernels 6] [--before e4b4243] [--only-encode]

Encoding: the events an ask emits most (an output, a step's end, a turn's usage, the end),
as `event_json` gives them through the codec, against the dict displays the events'
`to_json` methods built before issue 33 (copied below as they were). Declaring and making
a wire class: the same fields as `@dataclass(frozen=True)` and as `@frozen`. `%load_ext
jupyter_ci`: fresh kernels alternately on the `--before` commit's package (extracted with
`git archive`) and on this tree's: its round trip, its CPU in the kernel, then the first and
third `%%ask` after it (a scripted model, registered in a cell before each), headless and as
the labextension sends them; then the CPU of `%load_ext` in a fresh interpreter, alternately.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_client.manager import start_new_kernel

sys.path.insert(0, str(Path(__file__).parent))
from bench_ask import FOLDER_FILES, execute

from jupyter_ci.agent.actions import RunCode, Unresolved
from jupyter_ci.agent.events import (
    AskEnded,
    Event,
    Outcome,
    OutputsChanged,
    StepEnded,
    Usage,
    event_json,
)
from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.agent.types import CodeResult, ErrorInfo
from jupyter_ci.wire.events import StepEnd, StepError, Text
from jupyter_ci.wire.frozen import frozen

ROOT = Path(__file__).parent.parent


def before_json(event: Event) -> dict[str, Any]:
    """The JSON form as the events' own `to_json` methods wrote it before the codec."""
    if isinstance(event, OutputsChanged):
        return {"type": "output", "step": event.step, "output": event.change.output}
    if isinstance(event, StepEnded):
        run, result, error = event.run, event.result, event.result.error
        return {"type": "step_end", "step": run.step, "attempt": run.attempt,
                "kind": run.kind, "code": run.code, "status": result.status,
                "execution_count": result.execution_count,
                "duration_ms": round(result.duration_s * 1000, 1),
                "error": {"ename": error.ename, "evalue": error.evalue} if error else None}
    if isinstance(event, Usage):
        return {"type": "usage", "input_tokens": event.input_tokens,
                "output_tokens": event.output_tokens, "ask_tokens": event.ask_tokens,
                "cached_tokens": event.cached_tokens, "cost_usd": _usd(event.cost_usd),
                "ask_cost_usd": _usd(event.ask_cost_usd),
                "context_window": event.context_window}
    assert isinstance(event, AskEnded)
    outcome = event.outcome
    found = outcome.unresolved
    return {"type": "ask_end", "status": outcome.status, "answer": outcome.answer,
            "error": None, "unresolved": None if found is None else {
                "step": found.step, "error": found.error, "names": list(found.names),
                "message": found.describe()},
            "steps": outcome.steps, "tokens": outcome.tokens, "usage": {
                "input_tokens": outcome.usage.input_tokens,
                "output_tokens": outcome.usage.output_tokens,
                "cached_tokens": outcome.usage.cached_tokens,
                "cost_usd": _usd(outcome.usage.cost_usd)},
            "edits": []}


def _usd(amount: float | None) -> float | None:
    return None if amount is None else round(amount, 8)


def samples() -> dict[str, Event]:
    """One event of each kind an ask emits most."""
    run = RunCode("x = 1", 1, 1, "c1")
    out = {"output_type": "stream", "name": "stdout", "text": "hello\n"}
    return {
        "output": OutputsChanged(1, OutputEvent("add", output=out)),
        "step_end": StepEnded(run, CodeResult("error", execution_count=3, duration_s=0.25,
                                              error=ErrorInfo("NameError", "x"))),
        "usage": Usage(1200, 80, 1280, 0, 0.0123, 0.0456, 200_000),
        "ask_end": AskEnded(Outcome("done", "Yes.", unresolved=Unresolved(1, "E", ("x",)),
                                    steps=2, tokens=40)),
    }


def encode_ratios(rounds: int) -> None:
    """Print each event's codec encoding time against its hand-written one."""
    for name, event in samples().items():
        assert event_json(event) == before_json(event), name  # the same JSON, byte for byte
        before: list[float] = []
        after: list[float] = []
        for _ in range(rounds):
            before.append(_per_call(lambda e=event: before_json(e)))
            after.append(_per_call(lambda e=event: event_json(e)))
        b, a = statistics.median(before), statistics.median(after)
        print(f"encode {name:9} before {b * 1e6:6.2f} us  after {a * 1e6:6.2f} us  "
              f"ratio {a / b:5.2f}x")


def _per_call(fn: Callable[..., object], number: int = 20_000) -> float:
    return timeit.timeit(fn, number=number) / number


def twin(cls: type, decorate: Callable[[type], type]) -> type:
    """Declare `cls`'s fields again as a new class made by `decorate`."""
    body: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                            "__doc__": cls.__doc__, "__annotations__": {}}
    for item in dataclasses.fields(cls):
        body["__annotations__"][item.name] = item.type
        body[item.name] = dataclasses.field(
            default=item.default, default_factory=item.default_factory, repr=item.repr,
            hash=item.hash, compare=item.compare, metadata=item.metadata, kw_only=item.kw_only)
    return decorate(type(cls.__name__, (), body))


#: Wire classes by their fields' count, each with an instance's field values.
DECLARED = {"Text": Text("hi"), "Usage": samples()["usage"],
            "StepEnd": StepEnd(1, 1, "code", "x = 1", "error", 3, 12.5, StepError("E", "x"))}


def define_ratios(rounds: int) -> None:
    """Print the cost of declaring, then of making, a class by `@frozen` and by the stdlib."""
    makers: dict[str, Callable[[type], type]] = {"stdlib": dataclasses.dataclass(frozen=True),
                                                 "frozen": frozen}
    for name, sample in DECLARED.items():
        cls, values = type(sample), vars(sample)
        declare = {m: _declare_time(cls, made, rounds) for m, made in makers.items()}
        make = {m: _make_time(twin(cls, made), values) for m, made in makers.items()}
        for what, took in (("declare", declare), ("make", make)):
            b, a = took["stdlib"], took["frozen"]
            print(f"{what:7} {name:8} ({len(values)} fields)  dataclass(frozen=True) "
                  f"{b * 1e6:7.2f} us  @frozen {a * 1e6:7.2f} us  ratio {a / b:5.2f}x")


def _declare_time(cls: type, decorate: Callable[[type], type], rounds: int) -> float:
    return min(timeit.repeat(lambda: twin(cls, decorate), number=50, repeat=rounds)) / 50


def _make_time(made: type, values: dict[str, Any]) -> float:
    return _per_call(lambda: made(**values))


def load_ext_ratio(rounds: int, ref: str) -> None:
    """Print `%load_ext jupyter_ci` and the first asks after it on `ref` and on this tree."""
    with (tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as data,
          tempfile.TemporaryDirectory() as work):
        for name in FOLDER_FILES:  # the kernels' folder: a step scans it for changed files
            Path(work, name).write_text("x\n")
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "jupyter_ci"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", folder, str(ROOT / "jupyter_ci")],
                       check=True)
        trees = {"before": folder, "after": str(ROOT)}
        times: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        for _ in range(rounds):  # fresh kernels, alternately on each tree
            for door, name in itertools.product(DOORS, trees):
                for what, seconds in _kernel_run(trees[name], door, data, work).items():
                    times[name].setdefault(what, []).append(seconds)
        for what in times["after"]:
            b, a = (statistics.median(times[n][what]) for n in ("before", "after"))
            least = min(times["after"][what]) / min(times["before"][what])
            print(f"{LABELS[what]:34} before ({ref}) {b * 1e3:6.1f} ms  after {a * 1e3:6.1f} ms"
                  f"  ratio {a / b:5.2f}x  (medians of {len(times['after'][what])} fresh "
                  f"kernels each; of the least {least:4.2f}x)")
        cpu: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(3 * rounds):
            for name, tree in trees.items():
                cpu[name].append(_load_ext_cpu(tree))
        b, a = min(cpu["before"]), min(cpu["after"])
        print(f"{'%load_ext jupyter_ci, CPU':34} before ({ref}) {b * 1e3:6.1f} ms  after "
              f"{a * 1e3:6.1f} ms  ratio {a / b:5.2f}x  (least of {3 * rounds} processes each, "
              "alternately: what a loaded machine adds is left out)")


#: What `_kernel_run` times, as printed.
LABELS = {"load_ext": "%load_ext jupyter_ci", "load_ext_cpu": "  its CPU in the kernel",
          "first_headless": "first %%ask after it, headless", "third_headless": "  third",
          "first_JupyterLab": "first %%ask after it, JupyterLab", "third_JupyterLab": "  third"}
#: The ask's model, registered again before each ask: one code step, then the answer.
SCRIPT = ("from jupyter_ci.agent.types import ModelReply\n"
          "from jupyter_ci.models.scripted import code_call, register\n"
          "register('bench', [code_call('y = 1'), ModelReply(text='done')])")
#: How each door's execute_request reads: the labextension announces itself, headless not.
DOORS: dict[str, dict[str, Any]] = {
    "headless": {}, "JupyterLab": {"jupyter_ci_frontend": {"protocol": 2}, "cellId": "bench"}}


def output(kc: Any, code: str) -> str:
    """Run code and return what it printed."""
    msg_id = kc.execute(code)
    printed = []
    while True:
        msg = kc.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            kc.get_shell_msg(timeout=60)  # its reply, so the next execute reads its own
            return "".join(printed)


def _kernel_run(tree: str, door: str, data: str, work: str) -> dict[str, float]:
    """Seconds of `%load_ext`, then of the kernel's first and third ask, in a fresh kernel."""
    env = {**os.environ, "PYTHONPATH": tree, "OPENAI_API_KEY": "sk-bench-not-used-000000",
           "JUPYTER_CI_MODEL": "openai:gpt-4.1", "JUPYTER_DATA_DIR": data}
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=work)
    try:
        execute(kc, "import time; _cpu = time.process_time()")
        took = {"load_ext": execute(kc, "%load_ext jupyter_ci")}
        took["load_ext_cpu"] = float(output(kc, "print(time.process_time() - _cpu)"))
        execute(kc, f"import jupyter_ci; assert jupyter_ci.__file__.startswith({tree!r})")
        for i in range(3):  # a headless kernel replays a kept answer: each prompt differs
            execute(kc, SCRIPT)
            ask = execute(kc, f"%%ask -m scripted:bench\nset y ({i} {time.time_ns()})",
                          DOORS[door])
            if i != 1:
                took[f"{('first', '', 'third')[i]}_{door}"] = ask
        return took
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


#: The CPU of what `%load_ext jupyter_ci` does, in a fresh interpreter that has loaded what a
#: kernel has (IPython, ipykernel, comm), in a plain InteractiveShell.
LOAD_EXT_CPU = ("import time, IPython, ipykernel.ipkernel, comm\n"
                "from IPython.core.interactiveshell import InteractiveShell\n"
                "shell = InteractiveShell.instance()\n"
                "t = time.process_time(); shell.run_line_magic('load_ext', 'jupyter_ci')\n"
                "took = time.process_time() - t\n"
                "import sys, jupyter_ci\n"
                "assert jupyter_ci.__file__.startswith(sys.argv[1]); print(took)")


def _load_ext_cpu(tree: str) -> float:
    # Run outside the repository: `python -c` puts its working directory first on sys.path,
    # which would import this tree's package for both sides.
    run = subprocess.run([sys.executable, "-c", LOAD_EXT_CPU, tree], capture_output=True,
                         text=True, check=True, cwd=tempfile.gettempdir(),
                         env={**os.environ, "PYTHONPATH": tree})
    return float(run.stdout)


def main() -> None:
    """Run the benchmarks the arguments ask for."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--kernels", type=int, default=6)
    parser.add_argument("--before", default="e4b4243", help="the commit before the wire")
    parser.add_argument("--only-encode", action="store_true")
    args = parser.parse_args()
    encode_ratios(args.rounds)
    define_ratios(args.rounds)
    if not args.only_encode:
        load_ext_ratio(args.kernels, args.before)


if __name__ == "__main__":
    main()
