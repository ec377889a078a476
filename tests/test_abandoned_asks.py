"""REST asks whose client is gone stop their model call at once and hold nothing meanwhile.

The issue: a client that hung up on `POST .../ask` left the model call streaming to its end
in one of the server's 6 worker threads, so 8 abandoned asks starved the server: a notebook
export (`asyncio.to_thread`) took 19.2 s instead of 27 ms and a new ask 20.7 s. These tests
run a real Jupyter Server (pytest-jupyter) with both providers pointing at tests/fakellm.py,
whose slow turns stream for ~60 s and record in `fake.cut_streams` when a stream found its
client (the server) gone. They check, against the clock of this process:

* hanging up on 8 streaming asks cuts all 8 provider streams within 1 s, and meanwhile a
  notebook export and a new ask take about what they took before the hang-ups (within 3x
  + 0.5 s of the same calls measured before, in the same test). The old code fails all of
  it: only 6 of the 8 asks got a thread to stream in, none was cut, and the export and
  the new ask waited for a thread (checked by running this file with ServiceModel.complete
  patched back to the sync adapter in asyncio.to_thread);
* deleting a session while its ask streams cuts the provider stream within 1 s.

Raw HTTP (asyncio streams) so a client can hang up mid-stream, as a browser tab or a
killed script does; the server runs on this test's event loop, so nothing here blocks it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import pytest
from traitlets.config import Config

from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_session_ask import ANTHROPIC_KEY, ask
from tests.test_sessions import Fetch, call, new_session

#: A model that streams for ~60 s (1200 chunks, 50 ms apart) unless its client goes away:
#: longer than this test waits for anything, so the old code's threads were still held.
SLOW = Turn("slow " * 960, chunk_chars=4, chunk_delay=0.05)
ABANDONED = 8
#: How soon after the hang-up the provider must see its stream cut (its next chunk or two).
CUT_WITHIN_S = 1.0
#: The longest this test waits for a stream's first text, or for an export or an ask.
WAIT_S = 15.0
MODELS = ("openai:gpt-test", "anthropic:claude-test")


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    """Both providers at the fake; sessions unboxed (the sandbox is not what is tested)."""
    config: Config = session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": fake.anthropic_base_url})
    config.JupyterCI.session_sandbox = "never"
    return config


class RawAsk:
    """One `POST .../ask` on its own connection, read as raw bytes so it can hang up."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.received = b""

    @classmethod
    async def start(cls, port: int, base_url: str, auth: dict[str, str], sid: str,
                    model: str) -> RawAsk:
        """Send the ask (its response's head comes with its first event)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps({"prompt": "write at length", "model": model}).encode()
        writer.write(
            f"POST {base_url}jupyter-ci/sessions/{sid}/ask HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\nAuthorization: {auth['Authorization']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body)
        return cls(reader, writer)

    async def reached(self, marker: bytes, timeout: float = WAIT_S) -> bool:
        """Read until `marker` arrived; False if it did not within `timeout`."""
        async def read() -> None:
            while marker not in self.received:
                chunk = await self.reader.read(65536)
                assert chunk, f"the stream ended before {marker!r}: {self.received[-300:]!r}"
                self.received += chunk

        try:
            await asyncio.wait_for(read(), timeout)
        except TimeoutError:
            return False
        assert self.received.startswith(b"HTTP/1.1 200 "), self.received[:300]
        return True

    async def ended(self, timeout: float = 10) -> bool:
        """Read on until the response ends (its last chunk, or EOF); True if it did."""
        async def read() -> None:
            while not self.received.endswith(b"0\r\n\r\n"):
                chunk = await self.reader.read(65536)
                if not chunk:
                    return
                self.received += chunk

        try:
            await asyncio.wait_for(read(), timeout)
        except TimeoutError:
            return False
        return True

    async def hang_up(self) -> None:
        """Close the connection mid-stream (unread data pending: the kernel sends a reset)."""
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


async def timed(work: Any) -> float:
    """Return the seconds an awaitable took (WAIT_S, and it is cancelled, if it takes longer)."""
    start = time.monotonic()
    try:
        await asyncio.wait_for(work, WAIT_S)
    except TimeoutError:
        return WAIT_S
    return time.monotonic() - start


async def export_and_ask(jp_fetch: Fetch, fake: FakeLLM, sid: str) -> tuple[float, float]:
    """Seconds of a notebook export and of a one-turn ask, both in session `sid`."""
    async def export() -> None:
        status, nb = await call(jp_fetch, "GET", sid, "notebook")
        assert status == 200 and nb["nbformat"] == 4

    async def quick() -> None:
        fake.push(Turn("Quick."))
        events = await ask(jp_fetch, sid, prompt=f"quick {time.monotonic_ns()}")
        assert events[-1][1]["answer"] == "Quick.", events[-1]

    return await timed(export()), await timed(quick())


async def wait_cuts(fake: FakeLLM, count: int, timeout: float = 5) -> list[float]:
    """Wait until the fake saw `count` streams cut (or `timeout` passed); return their times."""
    deadline = time.monotonic() + timeout
    while len(fake.cut_streams) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return sorted(fake.cut_streams)


async def test_hanging_up_on_asks_stops_their_model_calls_and_starves_nothing(
    jp_fetch: Fetch, fake: FakeLLM, http_server_port: tuple[Any, int], jp_base_url: str,
    jp_auth_header: dict[str, str],
) -> None:
    sids = [s["id"] for s in await asyncio.gather(
        *(new_session(jp_fetch) for _ in range(ABANDONED + 1)))]
    other, streaming = sids[0], sids[1:]
    await export_and_ask(jp_fetch, fake, other)  # warm both paths (the SDKs' first turn)
    base_export, base_ask = await export_and_ask(jp_fetch, fake, other)

    fake.push(*[SLOW] * ABANDONED)
    asks = [await RawAsk.start(http_server_port[-1], jp_base_url, jp_auth_header, sid,
                               MODELS[n % 2]) for n, sid in enumerate(streaming)]
    streamed = sum(await asyncio.gather(*(one.reached(b"event: text\n") for one in asks)))
    called = ABANDONED - fake.remaining
    hung_up_at = time.monotonic()
    for one in asks:
        await one.hang_up()
    hung_up_by = time.monotonic()
    export_s, ask_s = await export_and_ask(jp_fetch, fake, other)
    cuts = await wait_cuts(fake, called)

    # Every failure is listed, so that a regression shows what it costs, not only the first.
    problems = []
    if streamed < ABANDONED or called < ABANDONED:
        problems.append(f"only {streamed} of {ABANDONED} asks streamed text within {WAIT_S} s "
                        f"({called} reached the model): the others waited for a thread")
    if len(cuts) < called:
        problems.append(f"{len(cuts)} of the {called} provider streams were cut after their "
                        "clients hung up: the others went on streaming")
    if cuts and (cuts[0] < hung_up_at or cuts[-1] - hung_up_by > CUT_WITHIN_S):
        problems.append(f"provider streams were cut {cuts[0] - hung_up_at:+.2f} s to "
                        f"{cuts[-1] - hung_up_by:+.2f} s from the hang-ups (within "
                        f"{CUT_WITHIN_S} s after them expected)")
    if export_s > 3 * base_export + 0.5:
        problems.append(f"a notebook export took {export_s:.3f} s after the hang-ups, "
                        f"{base_export:.3f} s before")
    if ask_s > 3 * base_ask + 0.5:
        problems.append(f"a new ask took {ask_s:.3f} s after the hang-ups, {base_ask:.3f} s "
                        "before")
    assert not problems, "\n".join(problems)
    assert len(fake.cut_streams) == ABANDONED  # and the new ask's stream ran to its end


@pytest.mark.parametrize("model", MODELS)
async def test_deleting_a_session_stops_its_asks_model_call(
    jp_fetch: Fetch, fake: FakeLLM, http_server_port: tuple[Any, int], jp_base_url: str,
    jp_auth_header: dict[str, str], model: str,
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    fake.push(SLOW)
    streaming = await RawAsk.start(http_server_port[-1], jp_base_url, jp_auth_header, sid,
                                   model)
    assert await streaming.reached(b"event: text\n")
    deleted_at = time.monotonic()
    status, _ = await call(jp_fetch, "DELETE", sid)
    assert status == 204
    cuts = await wait_cuts(fake, 1)
    assert len(cuts) == 1, "the provider stream went on after its session was deleted"
    assert 0 <= cuts[0] - deleted_at <= CUT_WITHIN_S, cuts[0] - deleted_at
    # The client's response ends too, saying why (no result: the ask was cancelled).
    assert await streaming.ended(), streaming.received[-300:]
    assert b"event: result" not in streaming.received
    assert b"event: error" in streaming.received and b"unknown_session" in streaming.received
    await streaming.hang_up()
