"""Every code block of README.md and docs/**/*.md runs as written (Sybil; tests/docs_blocks.py).

python blocks run in this process against a real `jupyter server` with jupyter-ci
(`docs_server`), with `tests/fakellm.py` as OpenAI and Anthropic (their SDKs' variables
set, so `OpenAI()` and `anthropic.Anthropic()` work as written) and `JUPYTER_TOKEN`
exported; bash blocks run in bash with `URL` and `JUPYTER_TOKEN` exported, in a folder
holding a small `sales.csv`; ipython blocks (`%%ask`) run as a notebook cell in a real
kernel (nbclient) against the fake model; config blocks are loaded as a config file.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sybil import Document, Example
from traitlets.config import Config, Configurable
from traitlets.config.loader import PyFileConfigLoader

from tests.docs_blocks import DOCS_URL, FILES, RUN, SHOWN, DocsEnv, config_snippet, documents
from tests.docs_blocks import blocks as blocks_of
from tests.fakellm import FakeLLM, Turn
from tests.fakellm_wire import Recorded
from tests.nbrun import TEST_KEY, clean_env, error_of, run_cells, text_of
from tests.test_server import _wait_for_server_info

pytestmark = pytest.mark.xdist_group("docs")  # one worker, one server, blocks in file order
DOCS = documents()
EXAMPLES = [(path, i) for path, doc in DOCS.items() for i, _ in enumerate(doc)]
SALES = "region,units\nnorth,17\nsouth,42\neast,23\n"


class Answers:
    """A model that calls the tool it was offered once, then answers in text; for every ask."""

    times = 10**6

    def __call__(self, request: Recorded) -> Turn:
        """Answer one request of either provider."""
        body = request.body if isinstance(request.body, dict) else {}
        last = (body.get("messages") or [{}])[-1]
        content = last.get("content")
        answered = last.get("role") == "tool" or (
            isinstance(content, list)
            and any(isinstance(p, dict) and p.get("type") == "tool_result" for p in content))
        tools = body.get("tools") or []
        if answered or not tools:
            return Turn("The answer is 6765.")
        tool = tools[0].get("function", tools[0])
        return Turn("", tool_calls=[(tool["name"], {"code": "print(6765)"})])


@pytest.fixture(scope="module")
def docs_fake() -> Iterator[FakeLLM]:
    """Serve the fake model for the module's server and blocks."""
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory,
                docs_fake: FakeLLM) -> Iterator[DocsEnv]:
    """Start a real `jupyter server` with jupyter-ci whose model keys point at the fake."""
    home = tmp_path_factory.mktemp("docs-server")
    config, runtime = home / "config", home / "runtime"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(json.dumps({
        "ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
        "JupyterCI": {"session_pool": 0, "model": "openai:gpt-test"}}))
    keys = {"OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": docs_fake.openai_base_url,
            "ANTHROPIC_API_KEY": TEST_KEY, "ANTHROPIC_BASE_URL": docs_fake.anthropic_base_url}
    env = clean_env(JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(runtime),
                    **keys)
    log = (home / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", "--port=0",
         "--ip=127.0.0.1", "--IdentityProvider.token=docs-token",
         f"--ServerApp.root_dir={home}"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        info = _wait_for_server_info(runtime, proc)
        cwd = home / "work"
        cwd.mkdir()
        (cwd / "sales.csv").write_text(SALES)
        yield DocsEnv(url=info["url"].rstrip("/"), token="docs-token", cwd=cwd,
                      env={**keys, "JUPYTER_TOKEN": "docs-token"})
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)  # a hang guard, not a speed bound
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def where(example: Example) -> str:
    """Name a block by file and line."""
    return f"{Path(example.path).relative_to(FILES[0].parent)}:{example.line}"


def run_python(example: Example, source: str) -> None:
    """Run a python block in its file's namespace, or load it as a config file."""
    if config_snippet(source):
        check_config(example, source)
        return
    ctx: DocsEnv = example.namespace["__docs__"]
    with pytest.MonkeyPatch.context() as patch:
        for name, value in ctx.env.items():
            patch.setenv(name, value)
        patch.chdir(ctx.cwd)
        exec(compile(source, where(example), "exec"), example.namespace)


#: curl -s prints an error body and exits 0: in the tests an HTTP error status fails the block.
CURL = 'curl() { command curl --fail-with-body "$@"; }\n'


def run_bash(example: Example, source: str) -> None:
    """Run a bash block with URL and JUPYTER_TOKEN exported; fail on an error it printed."""
    ctx: DocsEnv = example.namespace["__docs__"]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, **ctx.env, "URL": ctx.url, "PATH": path}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", CURL + source], cwd=ctx.cwd,
                          env=env, capture_output=True, text=True, timeout=300)
    shown = f"{where(example)} exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert done.returncode == 0, shown
    # A run that failed is still a 200: its result says "status": "error".
    for sign in ('"reason"', '"status": "error"', "Traceback", "_xsrf"):
        assert sign not in done.stdout, f"{sign} in the output of {shown}"


def run_ipython(example: Example, source: str) -> None:
    """Run an ipython block (an %%ask) as a notebook cell in a real kernel."""
    ctx: DocsEnv = example.namespace["__docs__"]
    env = clean_env(OPENAI_API_KEY=TEST_KEY, OPENAI_BASE_URL=ctx.env["OPENAI_BASE_URL"],
                    JUPYTER_CI_MODEL="openai:gpt-test")
    nb = run_cells([source], env, ctx.cwd)
    cell = nb.cells[1]
    assert error_of(cell) is None, f"{where(example)}:\n{text_of(cell)}"
    assert "6765" in text_of(cell), f"{where(example)} showed no answer:\n{text_of(cell)}"


def configurable_classes() -> dict[str, type[Configurable]]:
    """Name the classes a docs config block may set: jupyter-ci's and Jupyter Server's."""
    from jupyter_server.gateway.gateway_client import GatewayClient
    from jupyter_server.serverapp import ServerApp

    from jupyter_ci.config import ServerSettings
    from jupyter_ci.server.nodelay import KernelWebsockets

    # c.JupyterCI takes every service's settings (ServerSettings holds them all).
    return {"JupyterCI": ServerSettings,
            **{cls.__name__: cls for cls in (KernelWebsockets, ServerApp, GatewayClient)}}


def check_config(example: Example, source: str) -> None:
    """Load a block as jupyter_server_config.py; each setting must exist and take its value."""
    ctx: DocsEnv = example.namespace["__docs__"]
    (ctx.cwd / "jupyter_server_config.py").write_text(source)
    config = PyFileConfigLoader("jupyter_server_config.py", str(ctx.cwd)).load_config()
    known = configurable_classes()
    for section, values in config.items():
        assert section in known, f"{where(example)}: no class {section} takes settings"
        traits = known[section].class_traits(config=True)
        for name in values:
            assert name in traits, f"{where(example)}: {section} has no setting {name}"
        if section in ("JupyterCI", "KernelWebsockets"):
            made = known[section](config=Config({section: values}))
            for name in values:
                getattr(made, name)  # validates the value


RUNNERS = {"python": run_python, "bash": run_bash, "ipython": run_ipython}


@pytest.mark.parametrize(("path", "index"), EXAMPLES,
                         ids=[f"{p.relative_to(FILES[0].parent)}-{i}" for p, i in EXAMPLES])
def test_the_block_runs_as_written(path: Path, index: int, docs_server: DocsEnv,
                                   docs_fake: FakeLLM) -> None:
    doc: Document = DOCS[path]
    docs_fake.reset()
    docs_fake.push(Answers())
    doc.namespace["__docs__"] = DocsEnv(docs_server.url, docs_server.token, docs_server.cwd,
                                        docs_server.env, RUNNERS)
    list(doc)[index].evaluate()


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FILES[0].parent)) for p in FILES])
def test_every_block_is_run_or_marked_with_a_reason(path: Path) -> None:
    found = blocks_of(path)
    for block in found:
        here = f"{path.name}:{block.line}"
        if block.language.startswith("{"):
            continue  # a MyST directive (toctree, eval-rst)
        assert block.language, f"{here}: a fence without a language (text? python?)"
        assert block.language in RUN | SHOWN, f"{here}: unknown fence language {block.language}"
        if block.skip is not None:
            assert block.language in RUN, f"{here}: a skip marker on a block that never runs"
            assert len(block.skip) > 10, f"{here}: say why it cannot run"
    runnable = [b for b in found if b.language in RUN and b.skip is None]
    examples = list(DOCS[path])
    assert len(examples) == len(runnable), f"{path.name}: Sybil found {len(examples)} blocks"
    assert [e.line for e in examples] == [b.line for b in runnable]


def test_examples_name_the_documented_server() -> None:
    # The docs' blocks say http://localhost:8888 (what lab.sh serves); the tests swap it.
    assert any(DOCS_URL in str(e.parsed) for doc in DOCS.values() for e in doc)
