"""Measure the wire codec against the hand-written encoders it replaced, and `%load_ext`.

Prints ratios, not pass/fail: these machines are noisy, so both sides run in the same
process (or in kernels started alternately), interleaved.

    python bench/bench_wire.py [--rounds 9] [--kernels 6] [--before e4b4243] [--only-encode]

Encoding: the events an ask emits most (an output, a step's end, a turn's usage, the end),
as `event_json` gives them through the codec, against the dict displays the events'
`to_json` methods built before issue 33 (copied below as they were). `%load_ext
jupyter_ci`: fresh kernels alternately on the `--before` commit's package (extracted with
`git archive`) and on this tree's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_client.manager import start_new_kernel

sys.path.insert(0, str(Path(__file__).parent))
from bench_ask import execute

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


def load_ext_ratio(rounds: int, ref: str) -> None:
    """Print `%load_ext jupyter_ci` on `ref`'s package against this tree's, alternately."""
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "jupyter_ci"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", folder, str(ROOT / "jupyter_ci")],
                       check=True)
        trees = {"before": folder, "after": str(ROOT)}
        times: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(rounds):
            for name, tree in trees.items():
                times[name].append(_load_ext(tree))
        b, a = (statistics.median(times[n]) for n in ("before", "after"))
        print(f"%load_ext jupyter_ci  before ({ref}) {b * 1e3:6.1f} ms  after {a * 1e3:6.1f} ms"
              f"  ratio {a / b:5.2f}x  (medians of {rounds} fresh kernels each)")
        cpu = {name: min(_import_cpu(tree) for _ in range(3 * rounds))
               for name, tree in trees.items()}
        print(f"import of what it loads, CPU  before {cpu['before'] * 1e3:6.1f} ms  after "
              f"{cpu['after'] * 1e3:6.1f} ms  ratio {cpu['after'] / cpu['before']:5.2f}x  "
              f"(least of {3 * rounds} processes each: what a loaded machine adds is left out)")


#: Times the CPU of importing what `%load_ext jupyter_ci` loads, in a fresh interpreter that
#: has what a kernel has loaded already.
IMPORT_CPU = ("import time, IPython, ipykernel.ipkernel, comm; t = time.process_time(); "
              "import jupyter_ci.kernel.magics; took = time.process_time() - t; "
              "import sys; assert jupyter_ci.__file__.startswith(sys.argv[1]); print(took)")


def _import_cpu(tree: str) -> float:
    # Run outside the repository: `python -c` puts its working directory first on sys.path,
    # which would import this tree's package for both sides.
    run = subprocess.run([sys.executable, "-c", IMPORT_CPU, tree], capture_output=True,
                         text=True, check=True, cwd=tempfile.gettempdir(),
                         env={**os.environ, "PYTHONPATH": tree})
    return float(run.stdout)


def _load_ext(tree: str) -> float:
    env = {**os.environ, "PYTHONPATH": tree, "OPENAI_API_KEY": "sk-bench-not-used-000000",
           "JUPYTER_CI_MODEL": "openai:gpt-4.1"}
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        execute(kc, "pass")
        seconds = execute(kc, "%load_ext jupyter_ci")
        execute(kc, f"import jupyter_ci; assert jupyter_ci.__file__.startswith({tree!r})")
        return seconds
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main() -> None:
    """Run the benchmarks the arguments ask for."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--kernels", type=int, default=6)
    parser.add_argument("--before", default="e4b4243", help="the commit before the wire")
    parser.add_argument("--only-encode", action="store_true")
    args = parser.parse_args()
    encode_ratios(args.rounds)
    if not args.only_encode:
        load_ext_ratio(args.kernels, args.before)


if __name__ == "__main__":
    main()
