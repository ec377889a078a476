"""Measure the server's model service against its baselines, side by side in one run.

Prints ratios, not pass/fail: these machines are noisy, so each figure is compared with its
baseline measured in the same run, interleaved.

    python bench/bench_service.py [--kernels 4] [--rounds 30]

Against a real `jupyter server` (bench_sessions.start_server) whose providers point at the
fake OpenAI/Anthropic server of tests/fakellm.py, with notebook kernels the server starts
(POST /api/kernels, driven over ZMQ: they get the service's URL and a credential, and load no
provider SDK; a REST session's kernel gets neither):

1. a kernel's first `%%ask` right after `%load_ext jupyter_ci` against its third, per
   provider, over --kernels fresh kernels each (goal <= 1.2x);
2. `%load_ext jupyter_ci` against `%load_ext autoreload`, each the first thing a fresh
   kernel loads, kernels alternating;
3. the time to the first text of a turn through the service (its kernel client,
   `ServiceModel`, from this process with a kernel's credential) against the SDK adapter
   calling the fake directly (warm), interleaved (goal <= 1.05x + 1 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_sessions import start_server
from notebook_kernel import NotebookKernel

from jupyter_ci.agent.prompts import RUN_PYTHON
from jupyter_ci.agent.types import Message, ModelRequest
from jupyter_ci.models.base import Endpoint
from jupyter_ci.models.openai import OpenAIChatModel
from jupyter_ci.models.service import ServiceModel
from jupyter_ci.providers import get as provider_spec
from jupyter_ci.server.broker.broker import BROKER_ROUTE

KEY = "sk-test-0123456789abcdefghij"
MODELS = {"openai": "openai:gpt-test", "anthropic": "anthropic:claude-test"}
#: A turn as an ask's first one is: the system prompt, the user's words, the code tool.
REQUEST = ModelRequest(system="You are a data analyst.", messages=(Message("user", "hi"),),
                       tools=(RUN_PYTHON,), max_tokens=256)


def current_bytecode() -> None:
    """Compile the package's bytecode where it is stale, as installing a wheel does.

    With PYTHONDONTWRITEBYTECODE set (as in some dev shells), each kernel would compile every
    module edited since the last write from source: tens of ms on `%load_ext` and the first
    ask that an installed jupyter-ci never pays.
    """
    import compileall

    import jupyter_ci

    compileall.compile_dir(os.path.dirname(jupyter_ci.__file__), quiet=1)


def timed(fn: Callable[[], Any]) -> float:
    """Return the seconds `fn()` took."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def ask_cell(model: str) -> str:
    """Return an %%ask cell with a prompt never seen before (a kept answer is not replayed)."""
    return f"%%ask -m {model}\nsay hello ({time.time_ns()})"


def kernel_asks(server: tuple[str, str], fake: Any, reply: Any, model: str
                ) -> tuple[float, float, float]:
    """In a fresh kernel: seconds of `%load_ext jupyter_ci`, of the first ask and the third."""
    with NotebookKernel(*server) as kernel:
        kernel.execute("pass")  # the kernel's own first-execute cost, paid by neither figure
        load = timed(lambda: kernel.execute("%load_ext jupyter_ci"))
        asks = []
        for _ in range(3):
            fake.push(reply)
            asks.append(timed(lambda: kernel.execute(ask_cell(model))))
            if fake.remaining:
                raise RuntimeError(f"the {model} ask did not call the model")
        return load, asks[0], asks[2]


def kernel_autoreload(server: tuple[str, str]) -> float:
    """In a fresh kernel: seconds of `%load_ext autoreload`, the baseline extension."""
    with NotebookKernel(*server) as kernel:
        kernel.execute("pass")
        return timed(lambda: kernel.execute("%load_ext autoreload"))


def bench_kernels(server: tuple[str, str], fake: Any, reply: Any, kernels: int) -> None:
    """Measurements 1 and 2, kernels of each kind alternating."""
    firsts: dict[str, list[tuple[float, float]]] = {name: [] for name in MODELS}
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(kernels):
        theirs.append(kernel_autoreload(server))
        for name, model in MODELS.items():
            load, first, third = kernel_asks(server, fake, reply, model)
            ours.append(load)
            firsts[name].append((first, third))
    for name, pairs in firsts.items():
        first = statistics.median(p[0] for p in pairs)
        third = statistics.median(p[1] for p in pairs)
        print(f"{name:9} first ask {first * 1e3:7.1f} ms, third {third * 1e3:7.1f} ms   ratio "
              f"{first / third:5.2f}x (goal <= 1.2x; right after %load_ext, {len(pairs)} "
              "kernels)")
    o, t = statistics.median(ours), statistics.median(theirs)
    print(f"%load_ext jupyter_ci {o * 1e3:7.1f} ms, %load_ext autoreload {t * 1e3:7.1f} ms   "
          f"ratio {o / t:5.2f}x (fresh kernels: {len(ours)} and {len(theirs)}; an execute's "
          "round trip included in both)")


def kernel_credential(kernel: NotebookKernel, server_url: str) -> tuple[str, str]:
    """Read a kernel's service URL and credential, as model-written code could."""
    env = json.loads(kernel.execute(
        "import os, json\nprint(json.dumps({k: os.environ.get(k, '') for k in "
        "('JUPYTER_CI_BROKER_URL', 'JUPYTER_CI_BROKER_TOKEN', 'JUPYTER_CI_BROKER_SOCKET')}))"))
    url = env["JUPYTER_CI_BROKER_URL"]
    if env["JUPYTER_CI_BROKER_SOCKET"]:
        # A boxed kernel reaches the service through a socket inside its box; the same
        # routes, for the same credential, are on the server's port.
        url = f"{server_url}/{BROKER_ROUTE}"
    return url, env["JUPYTER_CI_BROKER_TOKEN"]


def first_text(model: Any) -> tuple[float, float]:
    """Stream REQUEST through `model`; return seconds to the first text and to the end."""
    start = time.perf_counter()
    first = 0.0

    def on_text(_: str) -> None:
        nonlocal first
        if not first:
            first = time.perf_counter() - start

    reply = model.complete(REQUEST, on_text)
    if not reply.text or not first:
        raise RuntimeError("the turn streamed no text")
    return first, time.perf_counter() - start


def bench_turns(server: tuple[str, str], fake: Any, reply: Any, rounds: int) -> None:
    """Measurement 3: through the service against the SDK adapter straight to the fake."""
    spec = provider_spec("openai")
    assert spec is not None
    with NotebookKernel(*server) as kernel:  # its credential lives as long as it does
        url, credential = kernel_credential(kernel, server[0])
        via = ServiceModel(spec, "gpt-test", Endpoint(credential, url))
        direct = OpenAIChatModel(spec, "gpt-test", Endpoint(KEY, fake.openai_base_url))
        samples: dict[str, list[tuple[float, float]]] = {"direct": [], "service": []}
        fake.push(*[reply] * (2 * rounds + 10))
        for _ in range(5):  # warm both: the SDK's import and validators, connections
            first_text(direct)
            first_text(via)
        for n in range(rounds):
            order = [("direct", direct), ("service", via)]
            for name, model in order if n % 2 else order[::-1]:
                samples[name].append(first_text(model))
    for label, index in (("first text", 0), ("whole turn", 1)):
        d = statistics.median(s[index] for s in samples["direct"])
        v = statistics.median(s[index] for s in samples["service"])
        goal = f"   (goal <= 1.05x + 1 ms = {(1.05 * d + 0.001) * 1e3:.2f} ms)" if index == 0 \
            else ""
        print(f"{label:10} direct (SDK adapter) {d * 1e3:6.2f} ms   through the service "
              f"{v * 1e3:6.2f} ms   ratio {v / d:5.2f}x   extra {(v - d) * 1e3:5.2f} ms{goal}")


def main() -> None:
    """Start a fake provider and a server whose model service holds its keys; measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", type=int, default=4,
                        help="fresh kernels per provider for measurements 1 and 2")
    parser.add_argument("--rounds", type=int, default=30, help="turns of measurement 3")
    args = parser.parse_args()
    current_bytecode()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo, for tests/
    from tests.fakellm import FakeLLM, Turn

    short = Turn("Hello! Ask me about your data.")
    streamed = Turn("The service streams this reply chunk by chunk. " * 8, chunk_chars=8)
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as root, \
            tempfile.TemporaryDirectory() as data:
        os.environ.update({
            "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.openai_base_url,
            "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
            "JUPYTER_DATA_DIR": data})  # kernels keep headless answers there, not in yours
        server, url, token = start_server(root, 0, 2 * args.kernels + 5)
        try:
            bench_kernels((url, token), fake, short, args.kernels)
            bench_turns((url, token), fake, streamed, args.rounds)
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
