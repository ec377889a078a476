"""A turn through the JupyterHub service against one through a single server, in one run.

Prints ratios, not pass/fail. Needs root (it makes a Unix user for the Hub's server, as
tests/hub does) and configurable-http-proxy (tests/hub-proxy, `npm ci`).

    sudo python bench/bench_hub.py [--rounds 30]

Three ways to the same fake provider (tests/fakellm.py), each called as a kernel calls its
model service (`ServiceModel`, our own turn over HTTP), interleaved round by round:

1. single: a `jupyter server` whose model service holds the key, with a kernel's credential;
2. hub: a user's server under a real JupyterHub (LocalProcessSpawner, the docs' config), with
   its kernel's credential: the server holds no key and forwards the turn to the Hub's
   jupyter-ci service as the user, which calls the provider;
3. service: the Hub's service called straight with a token of that user, the turn's route as
   the user's server calls it (what the Hub adds besides the hop).

The goal (issue 35): hub <= 1.1x single plus one loopback hop, the hop measured here as the
round trip of an empty request (a 404) to the service on a kept connection.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo, for tests/

from bench_service import REQUEST, current_bytecode, first_text, kernel_credential
from bench_sessions import start_server
from notebook_kernel import NotebookKernel

from jupyter_ci.models.base import Endpoint
from jupyter_ci.models.service import ServiceModel
from jupyter_ci.providers import get as provider_spec
from tests.hub.harness import UnixUser

KEY = "sk-test-0123456789abcdefghij"
USER = "jcibenchhub"
MODEL = "gpt-5-mini"  # the docs' policy allows it


def hop(url: str, rounds: int = 100) -> float:
    """Return the median round trip of an empty request on a kept connection (one hop)."""
    with httpx.Client() as client:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            client.get(url)
            times.append(time.perf_counter() - start)
    return statistics.median(times[10:])


def hub_models(fake: object, root: Path, user: UnixUser, python: str
               ) -> tuple[object, dict[str, ServiceModel], float]:
    """Start the Hub and the user's server; return the Hub and the two models through it."""
    from tests.hub.clients import environ_of, processes_of, start_kernel
    from tests.hub.harness import running_hub

    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.openai_base_url}  # type: ignore[attr-defined]
    context = running_hub(root, python, [USER], "jcibenchadmin", env, {})
    hub = context.__enter__()
    hub.start_server(USER)
    token = hub.token_for(USER, [f"access:servers!user={USER}",
                                 "access:services!service=jupyter-ci"])
    kernel = start_kernel(hub, user, token)
    pid = next(p for p in processes_of(user) if kernel.kernel_id in " ".join(
        Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace").split("\0")))
    kernel_env = environ_of(pid)
    spec = provider_spec("openai")
    assert spec is not None
    models = {
        "hub": ServiceModel(spec, MODEL, Endpoint(kernel_env["JUPYTER_CI_BROKER_TOKEN"],
                                                  kernel_env["JUPYTER_CI_BROKER_URL"])),
        "service": ServiceModel(spec, MODEL, Endpoint(token, hub.service_url.rstrip("/"))),
    }
    # What the user's server adds: one more request on a kept connection to the service.
    return (context, kernel), models, hop(f"{hub.service_url}no-such-route")


def main() -> None:
    """Measure the three ways, interleaved, and print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="turns each way")
    args = parser.parse_args()
    current_bytecode()
    from tests.fakellm import FakeLLM, Turn
    from tests.hub.harness import make_users, reachable_python, remove_user

    streamed = Turn("The service streams this reply chunk by chunk. " * 8, chunk_chars=8)
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as single_root, \
            tempfile.TemporaryDirectory() as hub_root, tempfile.TemporaryDirectory() as data:
        Path(hub_root).chmod(0o755)
        os.environ.update({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.openai_base_url,
                           "JUPYTER_DATA_DIR": data})
        [user] = make_users([USER])
        # Both servers on the interpreter the Hub's user can run (the system's Python).
        python = reachable_python(Path(hub_root), user)
        server, url, token = start_server(single_root, 0, 5, python=python)
        (context, kernel), models, loop_hop = hub_models(fake, Path(hub_root), user, python)
        try:
            with NotebookKernel(url, token) as single_kernel:
                spec = provider_spec("openai")
                assert spec is not None
                service_url, credential = kernel_credential(single_kernel, url)
                models["single"] = ServiceModel(spec, MODEL, Endpoint(credential, service_url))
                run(models, fake, streamed, args.rounds, loop_hop)
        finally:
            kernel.close()
            context.__exit__(None, None, None)
            server.terminate()
            server.wait(30)
            remove_user(USER)


def run(models: dict[str, ServiceModel], fake: object, reply: object, rounds: int,
        loop_hop: float) -> None:
    """Interleave the turns, then print what each way took."""
    fake.push(*[reply] * (len(models) * (rounds + 5)))  # type: ignore[attr-defined]
    names = ["single", "hub", "service"]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for _ in range(5):  # warm: connections, the SDKs in the services
        for name in names:
            first_text(models[name])
    for n in range(rounds):
        for name in names[n % 3:] + names[:n % 3]:
            samples[name].append(first_text(models[name]))
    assert REQUEST.tools, "the bench's turn offers the code tool, as an ask's does"
    for label, index in (("first text", 0), ("whole turn", 1)):
        single = statistics.median(s[index] for s in samples["single"])
        hub = statistics.median(s[index] for s in samples["hub"])
        service = statistics.median(s[index] for s in samples["service"])
        goal = 1.1 * single + loop_hop
        print(f"{label:10} single server {single * 1e3:6.2f} ms | through the Hub "
              f"{hub * 1e3:6.2f} ms ({hub / single:4.2f}x) | the Hub's service straight "
              f"{service * 1e3:6.2f} ms ({service / single:4.2f}x) | one loopback hop "
              f"{loop_hop * 1e3:5.2f} ms | goal hub <= 1.1x + hop = {goal * 1e3:6.2f} ms: "
              f"{'met' if hub <= goal else 'NOT met'}")


if __name__ == "__main__":
    main()
