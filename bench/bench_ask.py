"""Measure what %%ask costs beyond the code it runs, side by side in one run.

Prints ratios, not pass/fail: these machines are noisy, so every figure is compared with a
baseline measured in the same kernel, interleaved.

    python bench/bench_ask.py [--rounds 20] [--steps 5] [--kernels 5] [--think 3]

The first ask of a kernel is compared with its third, per provider, against a fake
OpenAI/Anthropic server (tests/fakellm.py) that the real SDKs talk to: once after a pause
of --think seconds after `%load_ext` (a user typing the prompt), once straight after it
(Run All). These kernels run outside a server, so they load the provider's SDK themselves
on their first ask; bench_service.py measures kernels under a server (no SDK in them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import start_new_kernel

# Runs in the kernel: `_bench(n)` makes `-m scripted:bench` answer with n code steps, then "done".
SETUP = """
from jupyter_ci.agent.types import ModelReply
from jupyter_ci.models.scripted import code_call, register

def _bench(steps):
    register("bench", [code_call(f"x_{i} = {i}") for i in range(steps)] + [ModelReply(text="done")])
"""


def execute(kc: Any, code: str) -> float:
    """Run code and return wall seconds until the reply (outputs drained)."""
    start = time.perf_counter()
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=60)
    elapsed = time.perf_counter() - start
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"{code!r} failed: {reply['content']}")
    while True:  # drain iopub so queues don't grow between samples
        msg = kc.get_iopub_msg(timeout=10)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle" and \
                msg["parent_header"].get("msg_id") == msg_id:
            break
    return elapsed


#: A user's cell right after `%load_ext`.
NEXT_CELL = "import pandas"


def load_ext_times(rounds: int) -> dict[str, float]:
    """Median seconds of `%load_ext autoreload`, `%load_ext jupyter_ci` and NEXT_CELL after
    them, in fresh kernels with a default model (nothing is sent to it)."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench-not-used-0000000000",
           "JUPYTER_CI_MODEL": "openai:gpt-4.1"}
    runs: dict[str, list[float]] = {}
    for _ in range(rounds):
        km, kc = start_new_kernel(kernel_name="python3", env=env)
        try:
            execute(kc, "pass")
            runs.setdefault("autoreload", []).append(execute(kc, "%load_ext autoreload"))
            runs.setdefault("load_ext", []).append(execute(kc, "%load_ext jupyter_ci"))
            runs.setdefault("next", []).append(execute(kc, NEXT_CELL))
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return {name: statistics.median(times) for name, times in runs.items()}


def step_overhead(rounds: int, steps: int) -> tuple[float, float]:
    """Median seconds per plain cell, and per %%ask step (scripted model: no network)."""
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        execute(kc, "%load_ext jupyter_ci")
        execute(kc, SETUP)
        plain, per_step = [], []
        for i in range(rounds):
            plain.append(statistics.mean(execute(kc, f"x_{j} = {j}") for j in range(steps)))
            execute(kc, f"_bench({steps})")
            ask = execute(kc, f"%%ask --new -m scripted:bench\nround {i}")
            execute(kc, "_bench(0)")
            empty = execute(kc, f"%%ask --new -m scripted:bench\nempty {i}")
            per_step.append((ask - empty) / steps)
        return statistics.median(plain), statistics.median(per_step)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


#: Each ask: one code step, then the answer. The prompt differs every time: a headless
#: kernel replays the kept answer of a cell it ran before instead of asking.
ASK = "%%ask\nset y ({n})"


def first_and_third(fake: Any, env: dict[str, str], think: float) -> tuple[float, float]:
    """Seconds of a fresh kernel's first and third one-step ask, `think` s after %load_ext."""
    from tests.fakellm import Turn

    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        execute(kc, "%load_ext jupyter_ci")
        time.sleep(think)
        times = []
        for i in range(3):
            fake.push(Turn("", tool_calls=[("run_python", {"code": f"y = {i}"})]),
                      Turn("done"))
            times.append(execute(kc, ASK.format(n=time.time_ns())))
            if fake.remaining:
                raise RuntimeError("the ask did not call the model")
        return times[0], times[2]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def first_ask(kernels: int, think: float) -> None:
    """Print the first ask against the third, per provider, interleaved, in fresh kernels."""
    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo))  # for tests/
    from tests.fakellm import FakeLLM
    from tests.nbrun import anthropic_env, openai_env

    results: dict[tuple[str, float], list[tuple[float, float]]] = {}
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as data:
        envs = {"openai": openai_env(fake), "anthropic": anthropic_env(fake)}
        for env in envs.values():  # kernels import the code of this checkout
            env["PYTHONPATH"] = os.pathsep.join(
                [str(repo), *filter(None, [os.environ.get("PYTHONPATH")])])
            env["JUPYTER_DATA_DIR"] = data  # kept headless answers go there, not to yours
        for _ in range(kernels):
            for provider, env in envs.items():
                for pause in (think, 0.0):
                    results.setdefault((provider, pause), []).append(
                        first_and_third(fake, env, pause))
    for (provider, pause), pairs in results.items():
        first = statistics.median(p[0] for p in pairs)
        third = statistics.median(p[1] for p in pairs)
        when = f"{pause:g} s after %load_ext" if pause else "right after %load_ext"
        print(f"{provider:9} first ask {first * 1e3:7.1f} ms, third {third * 1e3:6.1f} ms   "
              f"ratio {first / third:5.2f}x (goal 1.2x)   {when}")


def main() -> None:
    """Run the benchmarks and print figures with their ratios."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--kernels", type=int, default=5,
                        help="fresh kernels per provider for the first-ask figures")
    parser.add_argument("--think", type=float, default=3.0,
                        help="seconds between %%load_ext and the first ask (typing)")
    parser.add_argument("--only-first-ask", action="store_true")
    args = parser.parse_args()
    first_ask(args.kernels, args.think)
    if args.only_first_ask:
        return
    plain, step = step_overhead(args.rounds, args.steps)
    # A step includes running its code, capture, display and the loop, but no client round
    # trip; the plain cell is a whole execute_request from a client, as a user runs one.
    print(f"plain cell (client round trip)      {plain * 1e3:7.2f} ms")
    print(f"%%ask step (scripted, in-kernel)    {step * 1e3:7.2f} ms   "
          f"ratio {step / plain:5.2f}x a plain cell")
    times = load_ext_times(max(3, args.rounds // 3))
    ours, base = times["load_ext"], times["autoreload"]
    print(f"%load_ext jupyter_ci  {ours * 1e3:7.2f} ms   ratio {ours / base:5.2f}x "
          f"%load_ext autoreload ({base * 1e3:.2f} ms); budget 150 ms -> {ours / 0.150:.2f}")
    print(f"`{NEXT_CELL}` right after it  {times['next'] * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
