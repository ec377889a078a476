"""Measure what %%ask costs beyond the code it runs, side by side in one run.

Prints ratios, not pass/fail: these machines are noisy, so every figure is compared with a
baseline measured in the same kernel, interleaved.

    python bench/bench_ask.py [--rounds 10] [--steps 5] [--runs 3] [--kernels 5] [--think 3]
                              [--only-steps | --only-load-ext | --only-first-ask]

One %%ask step beyond its model call is compared with a plain cell's round trip, interleaved
in the same kernel, for both ways a notebook runs an ask (JupyterLab's labextension, and
headless), in --runs fresh kernels: each run's median ratio and its rounds' spread, then the
spread of the run medians (the goal: at most 1.0x in every run).

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


def current_bytecode() -> None:
    """Compile the package's bytecode where it is stale, as installing a wheel does.

    With PYTHONDONTWRITEBYTECODE set (as in some dev shells), each kernel would compile every
    module edited since the last write from source: tens of ms on `%load_ext` and the first
    ask that an installed jupyter-ci never pays.
    """
    import compileall

    import jupyter_ci

    compileall.compile_dir(os.path.dirname(jupyter_ci.__file__), quiet=1)


def execute(kc: Any, code: str, metadata: dict[str, Any] | None = None) -> float:
    """Run code and return wall seconds until the reply (outputs drained)."""
    start = time.perf_counter()
    msg = kc.session.msg("execute_request", {
        "code": code, "silent": False, "store_history": True, "user_expressions": {},
        "allow_stdin": False, "stop_on_error": True})
    msg["metadata"] = metadata or {}  # what a frontend sends with its cells
    kc.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
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


#: The two ways a notebook's %%ask cell runs: with the labextension (it announces itself in
#: each execute_request: the cell shows a progress log, the steps go out on the comm), and
#: headless (nbclient, papermill, VS Code: the cell shows each step inline).
DOORS: dict[str, dict[str, Any]] = {
    "JupyterLab": {"jupyter_ci_frontend": {"protocol": 2}, "cellId": "bench-ask-cell"},
    "headless": {},
}
#: A notebook's folder: the steps report the files they create or change in it.
FOLDER_FILES = ("analysis.ipynb", "sales.csv", "notes.md", "README.md")


def step_run(rounds: int, steps: int, env: dict[str, str]
             ) -> dict[str, list[tuple[float, float]]]:
    """(plain cell, one %%ask step) seconds per round and door, in one fresh kernel.

    A step is `(ask with `steps` steps - the same ask with none) / steps`: its code run,
    capture, display, comm, journal and the loop's turn (the scripted model answers at
    once); the plain cell is a client's whole execute_request round trip of the same code.
    Each round runs plain cells, the ask and the empty ask back to back, per door.
    """
    with tempfile.TemporaryDirectory() as folder:
        for name in FOLDER_FILES:
            Path(folder, name).write_text("x\n")
        km, kc = start_new_kernel(kernel_name="python3", cwd=folder, env=env)
        try:
            execute(kc, "%load_ext jupyter_ci")
            execute(kc, SETUP)
            samples: dict[str, list[tuple[float, float]]] = {door: [] for door in DOORS}
            for i in range(-1, rounds):  # round -1 warms every path up
                for door, meta in DOORS.items():
                    plain = statistics.mean(execute(kc, f"x_{j} = {j}") for j in range(steps))
                    execute(kc, f"_bench({steps})")
                    ask = execute(kc, f"%%ask --new -m scripted:bench\n{door} {i}", meta)
                    execute(kc, "_bench(0)")
                    empty = execute(kc, f"%%ask --new -m scripted:bench\nempty {door} {i}",
                                    meta)
                    if i >= 0:
                        samples[door].append((plain, (ask - empty) / steps))
            return samples
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def print_load_ext(rounds: int) -> None:
    """Print `%load_ext jupyter_ci` against `%load_ext autoreload`, and the cell after it."""
    times = load_ext_times(rounds)
    ours, base = times["load_ext"], times["autoreload"]
    print(f"%load_ext jupyter_ci  {ours * 1e3:7.2f} ms   ratio {ours / base:5.2f}x "
          f"%load_ext autoreload ({base * 1e3:.2f} ms); budget 150 ms -> {ours / 0.150:.2f}"
          f"   ({rounds} fresh kernels, medians)")
    print(f"`{NEXT_CELL}` right after it  {times['next'] * 1e3:7.1f} ms")


def step_overhead(runs: int, rounds: int, steps: int) -> None:
    """Print one step's cost against a plain cell's round trip, with its spread over runs."""
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "JUPYTER_DATA_DIR": data}  # headless runs keep answers there
        per_run = [step_run(rounds, steps, env) for _ in range(runs)]
    for door in DOORS:
        medians = []
        for run in per_run:
            ratios = sorted(step / plain for plain, step in run[door])
            medians.append(statistics.median(ratios))
            plain = statistics.median(p for p, _ in run[door])
            step = statistics.median(s for _, s in run[door])
            print(f"%%ask step ({door:10}) {step * 1e3:5.2f} ms, plain cell {plain * 1e3:5.2f} ms"
                  f"   ratio {medians[-1]:4.2f}x (rounds: min {ratios[0]:4.2f}, max "
                  f"{ratios[-1]:4.2f}; {len(ratios)} rounds of {steps} steps)")
        print(f"%%ask step ({door:10}) over {runs} runs (kernels): ratio min "
              f"{min(medians):4.2f}x, median {statistics.median(medians):4.2f}x, max "
              f"{max(medians):4.2f}x   goal <= 1.0x in every run")


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
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--kernels", type=int, default=5,
                        help="fresh kernels per provider for the first-ask figures")
    parser.add_argument("--think", type=float, default=3.0,
                        help="seconds between %%load_ext and the first ask (typing)")
    parser.add_argument("--runs", type=int, default=3,
                        help="fresh kernels for the step figures (one run each)")
    parser.add_argument("--only-first-ask", action="store_true")
    parser.add_argument("--only-steps", action="store_true")
    parser.add_argument("--only-load-ext", action="store_true")
    args = parser.parse_args()
    current_bytecode()
    if args.only_steps:
        step_overhead(args.runs, args.rounds, args.steps)
        return
    if args.only_load_ext:
        print_load_ext(max(3, args.rounds // 3))
        return
    first_ask(args.kernels, args.think)
    if args.only_first_ask:
        return
    step_overhead(args.runs, args.rounds, args.steps)
    print_load_ext(max(3, args.rounds // 3))


if __name__ == "__main__":
    main()
