"""The browser tests' shared fixtures (a plugin, so tests/ui and tests/security share one
Chromium and one `jupyter lab`): Debian's Chromium, the lab servers, a fresh page per test.

Each folder of browser tests adds, in its conftest.py, the fixtures that differ from the other
tests: `fake` (the session's fake model) and the replacements of pytest-jupyter's autouse
loop and cleanup (tests/ui/conftest.py).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Error, sync_playwright

from tests.demo_wheel import demo_wheel
from tests.fakellm import FakeLLM
from tests.nbrun import TEST_KEY
from tests.ui.lab import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, Lab, LabServer, start_lab

#: JupyterLab's own uncaught errors, known upstream, that no part of ours is in: each its
#: message and a frame of its stack. They are kept apart from the page's errors (which tests
#: assert empty) and still written to the test's console artifact.
UPSTREAM_PAGE_ERRORS = (
    # JupyterLab 4.2's table of contents (the floors' stack) looks up a heading its list no
    # longer has when a cell scrolls into view after cells were inserted or removed (an
    # ask's steps; jupyterlab/jupyterlab#15166, #16401). JupyterLab 4.6 catches it as a warning.
    ("Cannot read properties of undefined (reading 'type')", "_onCellInViewportChanged"),
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the browser tests last, wherever they live: Playwright's loop runs from the first
    one to the end of the session, and pytest-jupyter's tests cannot run beside it. Under
    pytest-xdist (`-n 2`, scripts/test.sh) they are not a group: a group is one unit among
    others, and its worker would go on with pytest-jupyter's tests after it. Last in the list,
    they are the last tests each worker is sent, so nothing runs after them there; each
    worker that gets some starts its own `jupyter lab` and Chromium."""
    browser = [item for item in items if "browser" in getattr(item, "fixturenames", ())]
    items.sort(key=lambda item: item in browser)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item, so fixtures know whether the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "rep_call", None)
    return report is None or report.failed


@pytest.fixture(scope="session")
def chromium() -> str:
    """Return Debian's Chromium, or fail saying how to install it."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is missing at {CHROMIUM}: install it with "
                    "`apt-get update && apt-get install -y chromium` (scripts/test.sh does). "
                    "Do not use `playwright install`.", pytrace=False)
    return CHROMIUM


@pytest.fixture(scope="session")
def lab_server(session_fake: FakeLLM, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[LabServer]:
    """Start one isolated `jupyter lab` that reaches the fake model through its broker."""
    base = tmp_path_factory.mktemp("lab")
    # pip in the kernels sees only a wheel made here and installs into a folder of its own
    # (on the kernels' path), so an install test reaches no index and leaves the venv clean.
    demo_wheel(base / "wheels")
    (base / "site").mkdir()
    server = start_lab(base, {
        "OPENAI_API_KEY": TEST_KEY,
        "OPENAI_BASE_URL": session_fake.openai_base_url,
        "JUPYTER_CI_MODEL": "openai:gpt-test",
        "PIP_FIND_LINKS": str(base / "wheels"), "PIP_NO_INDEX": "1",
        "PIP_TARGET": str(base / "site"), "PYTHONPATH": str(base / "site"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1",
        "PIP_CONFIG_FILE": "/dev/null",
    })
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser(chromium: str) -> Iterator[Browser]:
    """Launch headless Chromium once."""
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def bare_lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A `jupyter lab` started with no provider key or URL at all, as on Binder (one per
    test: a key pasted in one must not configure the next)."""
    server = start_lab(tmp_path_factory.mktemp("bare-lab"), {})
    yield server
    server.stop()


@pytest.fixture
def lab(request: pytest.FixtureRequest, browser: Browser, lab_server: LabServer,
        fake: FakeLLM) -> Iterator[Lab]:
    """Give each test a fresh page, workspace and fake script; report what went wrong."""
    yield from _lab_page(request, browser, lab_server, fake)


@pytest.fixture
def bare_lab(request: pytest.FixtureRequest, browser: Browser, bare_lab_server: LabServer,
             fake: FakeLLM) -> Iterator[Lab]:
    """Like `lab`, on the server started without any key."""
    yield from _lab_page(request, browser, bare_lab_server, fake)


def _lab_page(request: pytest.FixtureRequest, browser: Browser, lab_server: LabServer,
              fake: FakeLLM) -> Iterator[Lab]:
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    name = request.node.name.replace("[", "-").replace("]", "")
    lab = Lab(page, lab_server, f"{name}-{uuid.uuid4().hex[:6]}")

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":  # with where it came from (a failed load names its URL)
            lab.console_errors.append(f"{msg.text} ({msg.location.get('url', '?')})")

    def on_page_error(error: Error) -> None:
        stack = error.stack or ""
        if any(error.message == message and frame in stack
               for message, frame in UPSTREAM_PAGE_ERRORS):
            lab.upstream_page_errors.append(stack)
            return
        lab.page_errors.append(f"{error.name}: {error.message}")
        if stack:  # where it was thrown, in the artifact and a failure's report
            lab.page_error_stacks.append(stack)

    page.on("console", on_console)
    page.on("pageerror", on_page_error)
    try:
        yield lab
    finally:
        if lab.console_errors or lab.page_errors or lab.upstream_page_errors:
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / f"{name}.console.txt").write_text("\n".join(
                lab.page_errors + lab.console_errors + lab.page_error_stacks
                + [f"(upstream) {stack}" for stack in lab.upstream_page_errors]),
                encoding="utf-8")
        if _failed(request):
            ARTIFACTS.mkdir(exist_ok=True)
            with contextlib.suppress(Error):
                page.screenshot(path=str(ARTIFACTS / f"FAILED-{name}.png"))
            print(f"\n--- console errors ---\n{chr(10).join(lab.console_errors)}")
            print(f"--- page errors ---\n{chr(10).join(lab.page_errors + lab.page_error_stacks)}")
            print(f"--- fake model: {fake.calls()} calls, {fake.remaining} turns left ---")
            print(f"--- jupyter lab log (tail) ---\n{lab_server.log_tail()}")
        context.close()
        lab_server.shutdown_kernels()
