"""A model-written answer in the panel loads nothing from another site (issue 17, point 2).

Any URL the browser fetches with no click can carry data out of the answer (a beacon) and
fetches again on every reload. The model answers with one element per way HTML can load a
URL; a local "remote" server (another port of 127.0.0.1: another origin) records what
reaches it. A control first puts the same HTML straight into the page, so each vector is
shown to load when nothing filters it: a test of a vector that never loads would prove
nothing.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import Browser, Request, expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, LabServer, free_port

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")

#: Each way to load a URL with no click; {u} is the beacon's URL, {hp} its host:port/path.
VECTORS = {
    "video-poster": '<video poster="{u}" width="8" height="8"></video>',
    "audio-src": '<audio src="{u}" preload="auto"></audio>',
    "video-src": '<video src="{u}" preload="auto" width="8" height="8"></video>',
    "source-src": '<video preload="auto" width="8" height="8"><source src="{u}"></video>',
    "input-image": '<input type="image" src="{u}" alt="b">',
    "css-background": '<div style="background-image: url({u}); width: 8px; height: 8px">b</div>',
    "css-url": '<div style="border: 4px solid; border-image: url({u}) 4; width: 8px">b</div>',
    "style-element": "<style>div {{ background-image: url({u}); }}</style>",
    "img-backslash": '<img src="/\\{hp}" alt="b">',
    "img-tab": '<img src="/\t/{hp}" alt="b">',
    "img-remote": '<img src="{u}" alt="b">',
    "img-srcset": '<img srcset="{u} 1x" alt="b">',
    "picture-source": '<picture><source srcset="{u}"><img alt="b"></picture>',
}


@dataclass
class Beacon:
    """A server on another port of loopback that answers every GET with a tiny PNG."""

    port: int
    seen: list[str] = field(default_factory=list)

    def url(self, prefix: str, name: str) -> str:
        """Return the beacon URL of a vector."""
        return f"http://127.0.0.1:{self.port}/{prefix}/{name}"

    def html(self, prefix: str) -> str:
        """Return every vector's HTML, each pointing at its own beacon path."""
        return "\n".join(
            template.format(u=self.url(prefix, name), hp=f"127.0.0.1:{self.port}/{prefix}/{name}")
            for name, template in VECTORS.items())

    def hits(self, prefix: str) -> set[str]:
        """Return the vectors whose beacon under `prefix` was requested."""
        return {path.split("/")[2] for path in list(self.seen)
                if path.startswith(f"/{prefix}/")}


@contextlib.contextmanager
def beacon_server() -> Iterator[Beacon]:
    beacon = Beacon(free_port())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            beacon.seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(PNG)))
            self.end_headers()
            self.wfile.write(PNG)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", beacon.port), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield beacon
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Outcome:
    """What loaded: from the control HTML, and from the answer in the panel."""

    control: set[str]
    answer: set[str]
    requested: list[str]


@pytest.fixture(scope="module")
def outcome(browser: Browser, lab_server: LabServer, session_fake: FakeLLM
            ) -> Iterator[Outcome]:
    """Put the vectors in the page once raw (control), once as the model's answer."""
    session_fake.reset()
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    requested: list[str] = []

    def watch(request: Request) -> None:
        requested.append(request.url)

    page.on("request", watch)
    try:
        with beacon_server() as beacon:
            lab = Lab(page, lab_server, f"beacons-{uuid.uuid4().hex[:6]}")
            lab.open_notebook("beacons", ["1"])
            page.evaluate("""html => {
                const box = document.createElement('div');
                box.id = 'control';
                box.innerHTML = html;
                document.body.appendChild(box);
            }""", beacon.html("control"))
            page.wait_for_function("n => document.querySelectorAll('#control *').length >= n",
                                   arg=len(VECTORS))
            deadline = 0
            while beacon.hits("control") != set(VECTORS) and deadline < 50:
                page.wait_for_timeout(200)
                deadline += 1
            page.evaluate("() => document.getElementById('control').remove()")
            session_fake.push(Turn(f"Here is the page.\n\n{beacon.html('answer')}\n\nEnd."))
            lab.panel.open()
            lab.panel.ask("summarise the page")
            entry = lab.panel.part("ask").last
            expect(entry).to_have_attribute("data-jupyter-ci-status", "done", timeout=WAIT_MS)
            expect(entry.locator('[data-jupyter-ci="answer"]')).to_contain_text("End.")
            page.wait_for_timeout(2000)  # what would load has loaded
            lab.screenshot("panel-beacons")
            yield Outcome(beacon.hits("control"), beacon.hits("answer"), list(requested))
    finally:
        context.close()
        lab_server.shutdown_kernels()
        session_fake.reset()


@pytest.mark.parametrize("vector", list(VECTORS))
def test_nothing_in_an_answer_loads_from_another_site(outcome: Outcome, vector: str) -> None:
    assert vector in outcome.control, f"{vector} did not load even unfiltered: the test is void"
    assert vector not in outcome.answer
    assert not [url for url in outcome.requested if f"/answer/{vector}" in url]
