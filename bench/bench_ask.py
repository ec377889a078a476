"""Measure what %%ask costs beyond the code it runs, side by side in one run.

Prints ratios, not pass/fail: these machines are noisy, so every figure is compared with a
baseline measured in the same kernel, interleaved.

    python bench/bench_ask.py [--rounds 20] [--steps 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
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


def load_ext_times(rounds: int) -> tuple[float, float]:
    """Median seconds for `%load_ext jupyter_ci` and `%load_ext autoreload` in fresh kernels."""
    ours, base = [], []
    for _ in range(rounds):
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            execute(kc, "pass")
            base.append(execute(kc, "%load_ext autoreload"))
            ours.append(execute(kc, "%load_ext jupyter_ci"))
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return statistics.median(ours), statistics.median(base)


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


def main() -> None:
    """Run both benchmarks and print figures with their ratios."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    plain, step = step_overhead(args.rounds, args.steps)
    # A step includes running its code, capture, display and the loop, but no client round
    # trip; the plain cell is a whole execute_request from a client, as a user runs one.
    print(f"plain cell (client round trip)      {plain * 1e3:7.2f} ms")
    print(f"%%ask step (scripted, in-kernel)    {step * 1e3:7.2f} ms   "
          f"ratio {step / plain:5.2f}x a plain cell")
    ours, base = load_ext_times(max(3, args.rounds // 3))
    print(f"%load_ext jupyter_ci  {ours * 1e3:7.2f} ms   ratio {ours / base:5.2f}x "
          f"%load_ext autoreload ({base * 1e3:.2f} ms); budget 150 ms -> {ours / 0.150:.2f}")


if __name__ == "__main__":
    main()
