"""The adapters' async twin `acomplete`, through the real async SDKs against the fake server.

The model service streams turns from the Jupyter server's event loop: the same behaviour as
`complete` (see test_models.py), plus the usage reported so far kept in a `Usage`, and a
cancelled turn that closes the provider's stream at once.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
from collections.abc import Callable

import pytest

from jupyter_ci.agent.errors import ModelConfigError, ModelUnavailable
from jupyter_ci.agent.types import Image, Message, ModelRequest, ToolCall, ToolResult
from jupyter_ci.models import openai as openai_adapter
from jupyter_ci.models.anthropic import AnthropicChatModel
from jupyter_ci.models.base import AsyncChatModel, Endpoint, Usage
from jupyter_ci.models.openai import NO_IMAGES_NOTE, OpenAIChatModel
from tests.fakellm import ANTHROPIC_PATH, OPENAI_PATH, Fail, FakeLLM, Recorded, Step, Turn
from tests.fakellm_wire import image_parts
from tests.test_models import ANTHROPIC, KEY, OPENAI, PROVIDERS, ask

Model = OpenAIChatModel | AnthropicChatModel
MakeModel = Callable[..., Model]
#: A turn that streams for 100 chunks x 50 ms = 5 s, long after any test cancels it.
SLOW = Turn("slow " * 80, chunk_delay=0.05)
#: A tiny PNG a tool result "shows" the model.
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


@pytest.fixture(params=PROVIDERS)
def make_model(request: pytest.FixtureRequest, fake: FakeLLM) -> MakeModel:
    """Return a factory of adapters of one provider pointed at the fake server."""

    def make(retries: int = 2, timeout: float = 5.0) -> Model:
        if request.param == "openai":
            return OpenAIChatModel(OPENAI, "gpt-test",
                                   Endpoint(KEY, fake.openai_base_url, timeout, retries))
        return AnthropicChatModel(ANTHROPIC, "claude-test",
                                  Endpoint(KEY, fake.anthropic_base_url, timeout, retries))

    return make


def is_openai(model: Model) -> bool:
    return isinstance(model, OpenAIChatModel)


async def failure(model: AsyncChatModel, kind: type[Exception]) -> str:
    """Run a turn that must fail with `kind`; return the error text, checked for the key."""
    with pytest.raises(kind) as info:
        await model.acomplete(ask(), lambda _: None)
    assert info.value.__cause__ is None and info.value.__suppress_context__  # from None
    text = str(info.value)
    assert KEY not in text
    return text


# --- streaming, tool calls, usage ------------------------------------------------------------

async def test_text_streams_in_pieces_and_usage_is_kept(
    fake: FakeLLM, make_model: MakeModel
) -> None:
    answer = "The mean of the column is 42.5, computed over 1000 rows."
    fake.push(Turn(answer))
    pieces: list[str] = []
    usage = Usage()
    model = make_model()
    reply = await model.acomplete(ask(), pieces.append, usage)
    assert len(pieces) > 5
    assert "".join(pieces) == reply.text == answer
    assert (reply.input_tokens, reply.output_tokens) == (11, 7)
    assert usage == Usage(11, 7, reported=True)
    (req,) = fake.requests
    assert req.path == (OPENAI_PATH if is_openai(model) else ANTHROPIC_PATH)
    assert req.body["stream"] is True and req.body["max_tokens"] == 1000
    # The async client was used, with the SDK's async stamp on the request.
    assert req.headers.get("x-stainless-async", "false") != "false"


async def test_a_tool_call_streams_previews_of_its_arguments(
    fake: FakeLLM, make_model: MakeModel
) -> None:
    code = "import pandas as pd\nprint('héllo \"world\"')\n"
    fake.push(Turn("Let me check.", tool_calls=[("run_python", {"code": code})]))
    previews: list[tuple[str, str]] = []
    request = ModelRequest(ask().system, ask().messages, ask().tools, 1000,
                           on_tool_input=lambda name, raw: previews.append((name, raw)))
    usage = Usage()
    reply = await make_model().acomplete(request, lambda _: None, usage)
    assert reply.text == "Let me check."
    (call,) = reply.tool_calls
    assert call.name == "run_python" and call.id
    assert json.loads(call.arguments) == {"code": code}
    # Each preview is the raw text so far: growing, and the whole arguments at the end.
    assert len(previews) > 3 and {name for name, _ in previews} == {"run_python"}
    raws = [raw for _, raw in previews]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(raws))
    assert json.loads(raws[-1]) == {"code": code}
    assert usage == Usage(11, 7, reported=True)


async def test_the_async_client_is_built_once_like_the_sync_one(
    fake: FakeLLM, make_model: MakeModel
) -> None:
    fake.push(Turn("a"), Turn("b"))
    model = make_model(retries=1, timeout=7.0)
    assert (await model.acomplete(ask(), lambda _: None)).text == "a"
    client = model.async_client()
    assert (await model.acomplete(ask(), lambda _: None)).text == "b"
    assert model.async_client() is client
    sync = model.client()
    assert type(client).__name__ in ("AsyncOpenAI", "AsyncAnthropic")
    assert (client.api_key, str(client.base_url), client.timeout, client.max_retries) == (
        sync.api_key, str(sync.base_url), sync.timeout, sync.max_retries) == (
        KEY, str(sync.base_url), 7.0, 1)


# --- the OpenAI vision fallback -----------------------------------------------------------------

def with_an_image() -> ModelRequest:
    """A request whose last tool result shows the model an image."""
    shown = ToolResult("ok", "plotted", images=(Image("image/png", PNG, 8, 8),))
    return ask(Message("user", "plot"),
               Message("assistant", "", tool_calls=(ToolCall("call_1", "run_python", "{}"),)),
               Message.tool("call_1", shown))


def refuse_images_with_422(request: Recorded) -> Turn | Fail:
    """Answer as a server that refuses image content with HTTP 422."""
    return Fail(422, message="image input is not supported") if image_parts(request.body) \
        else Turn("Plotted, unseen.")


@pytest.mark.parametrize("refusal", [400, 422])
async def test_openai_a_model_that_refuses_images_is_asked_again_without_them(
    fake: FakeLLM, monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    monkeypatch.setattr(openai_adapter, "TEXT_ONLY", set())
    steps: list[Step]
    if refusal == 400:
        fake.text_only = True  # a 400 before any turn is taken, as vLLM answers
        steps = [Turn("Plotted, unseen."), Turn("Again.")]
    else:
        steps = [refuse_images_with_422, refuse_images_with_422, refuse_images_with_422]
    fake.push(*steps)
    model = OpenAIChatModel(OPENAI, "llava", Endpoint(KEY, fake.openai_base_url, 5.0, 0))
    reply = await model.acomplete(with_an_image(), lambda _: None)
    assert reply.text == "Plotted, unseen."
    first, second = (r.body for r in fake.requests)
    assert image_parts(first) and not image_parts(second)
    assert NO_IMAGES_NOTE in second["messages"][-1]["content"]
    assert len(openai_adapter.TEXT_ONLY) == 1
    # Remembered: the next turn is sent without images at once.
    await model.acomplete(with_an_image(), lambda _: None)
    assert len(fake.requests) == 3 and not image_parts(fake.requests[2].body)


async def test_openai_a_refusal_of_a_request_without_images_is_not_retried(
    fake: FakeLLM,
) -> None:
    fake.push(Fail(400, message="prompt is too long"), Turn("never sent"))
    model = OpenAIChatModel(OPENAI, "gpt-test", Endpoint(KEY, fake.openai_base_url, 5.0, 0))
    text = await failure(model, ModelUnavailable)
    assert "HTTP 400" in text and "prompt is too long" in text
    assert fake.calls() == 1


# --- failures --------------------------------------------------------------------------------

async def test_a_rejected_key_is_a_config_error(fake: FakeLLM, make_model: MakeModel) -> None:
    fake.push(Fail(401, message=f"Incorrect API key provided: {KEY}"))
    text = await failure(make_model(), ModelConfigError)
    assert "rejected the API key" in text and "***" in text
    assert fake.calls() == 1  # not retried


async def test_a_server_error_after_retries_is_unavailable(
    fake: FakeLLM, make_model: MakeModel
) -> None:
    fake.push(Fail(500, times=3))
    text = await failure(make_model(retries=2), ModelUnavailable)
    assert "HTTP 500" in text and "after 2 retries" in text and str(fake.port) in text
    assert fake.calls() == 3


async def test_an_error_inside_the_stream_keeps_the_usage_reported(
    fake: FakeLLM, make_model: MakeModel
) -> None:
    fake.push(Fail(529, message="Overloaded", mid_stream=True))
    model, usage = make_model(), Usage()
    with pytest.raises(ModelUnavailable, match="Overloaded"):
        await model.acomplete(ask(), lambda _: None, usage)
    # Anthropic's message_start came before the error event; OpenAI reports usage last.
    assert usage == (Usage() if is_openai(model) else Usage(1, 1, reported=True))


# --- cancellation ----------------------------------------------------------------------------

async def test_cancelling_closes_the_stream_at_once_and_keeps_the_usage_so_far(
    fake: FakeLLM, make_model: MakeModel
) -> None:
    fake.push(SLOW)
    model, usage = make_model(), Usage()
    pieces: list[str] = []
    first = asyncio.Event()

    def on_text(piece: str) -> None:
        pieces.append(piece)
        first.set()

    task = asyncio.ensure_future(model.acomplete(ask(), on_text, usage))
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()
    cancelled = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert time.monotonic() - cancelled < 1.0  # not waiting for the stream's 5 s
    # The server finds the connection closed at its next writes, 50 ms apart.
    while not fake.cut_streams and time.monotonic() - cancelled < 3.0:
        await asyncio.sleep(0.02)
    (cut,) = fake.cut_streams
    assert cut - cancelled < 1.0
    assert 0 < len("".join(pieces)) < len(SLOW.text) / 4
    if is_openai(model):
        assert not usage.reported  # OpenAI reports usage only in the last chunk
    else:
        assert usage == Usage(11, 1, reported=True)  # message_start: input, 1 output token


async def test_a_callback_that_raises_ends_the_turn_and_closes_the_stream(
    fake: FakeLLM, make_model: MakeModel
) -> None:
    fake.push(SLOW)

    def on_text(piece: str) -> None:
        raise ConnectionResetError("the browser went away")

    started = time.monotonic()
    with pytest.raises(ConnectionResetError):  # not an ask error: not the provider's failure
        await make_model().acomplete(ask(), on_text)
    # Closed by leaving the stream's context, not later by the garbage collector.
    while not fake.cut_streams and time.monotonic() - started < 3.0:
        await asyncio.sleep(0.02)
    (cut,) = fake.cut_streams
    assert cut - started < 1.5
