"""Replies that are not the provider's wire format: caught as they stream, and said plainly.

The SDKs let such replies through. An HTML page or plain text with status 200 (a base URL
that points at a web page, a proxy's login) reads as an empty stream, so as an empty reply;
a stream cut off before its end reads as a complete reply of the text so far; an event that
is not JSON raises a bare decode error. `Watch` reads each stream for `fold` and `afold`
(sdk_client.py): it checks the content type before the first event, each event as it is
folded into the turn, and the provider's end mark (finish_reason, message_stop) at the end,
and raises `ReplyProblem`; the adapter's frame adds the base URL that answered (`bad_reply`)
and so raises `BadModelReply`, whose message shows what came back, clipped and redacted.

Not retried: a malformed 200 is not transient the way a 429 or a 503 is (a base URL that
points at a web page answers the same way each time), and asking again after part of a
reply streamed would bill the turn twice.
"""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar

from jupyter_ci.agent.errors import AskError, BadModelReply, ModelUnavailable
from jupyter_ci.agent.secrets import Redactor
from jupyter_ci.agent.types import ModelReply, OnText
from jupyter_ci.providers import ProviderSpec

if TYPE_CHECKING:
    from jupyter_ci.models.sdk_client import Assembly

EVENT_STREAM = "text/event-stream"
#: Characters of a reply an error shows, at most.
SAMPLE_CHARS = 160
#: Where an exception raised while folding an event blames the event, not our callbacks.
_SHAPE_MODULES = ("pydantic", "pydantic_core", "openai", "anthropic")
E = TypeVar("E")


class Body(Protocol):
    """What `Watch` reads of an SDK stream's HTTP response (httpx2's or httpx's)."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def status_code(self) -> int: ...

    def read(self) -> bytes: ...


class AsyncBody(Protocol):
    """The async twin of `Body`."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def status_code(self) -> int: ...

    async def aread(self) -> bytes: ...


#: What a malformed reply was: no event stream at all (a web page, text), an event not in
#: the provider's format, a stream cut off before its end, or one that stopped sending.
ProblemKind = Literal["page", "event", "cut", "stalled"]


class ReplyProblem(Exception):
    """What was wrong with a reply, said from after "<provider> at <URL>"."""

    def __init__(self, said: str, kind: ProblemKind) -> None:
        super().__init__(said)
        self.said = said
        self.kind = kind


class Watch(Generic[E]):
    """Read one stream of events into `turn`, raising `ReplyProblem` for a malformed reply."""

    def __init__(self, turn: Assembly[E]) -> None:
        self.turn = turn
        self.content_type = EVENT_STREAM
        self.count = 0  # events read
        self.last: object = None

    def events(self, stream: Iterable[E], response: Body) -> Iterator[E]:
        """Yield the stream's events after checking what the response is."""
        try:
            self.content_type = _media_type(response)
            if self.content_type != EVENT_STREAM:
                _sniff(self.content_type, response.status_code, response.read())
            for event in stream:
                self.count, self.last = self.count + 1, event
                yield event
        except Exception as err:
            self.failed(err)
            raise

    async def aevents(self, stream: AsyncIterator[E], response: AsyncBody
                      ) -> AsyncGenerator[E, None]:
        """The async twin of `events`."""
        try:
            self.content_type = _media_type(response)
            if self.content_type != EVENT_STREAM:
                _sniff(self.content_type, response.status_code, await response.aread())
            async for event in stream:
                self.count, self.last = self.count + 1, event
                yield event
        except Exception as err:
            self.failed(err)
            raise

    def add(self, event: E, on_text: OnText) -> None:
        """Fold one event into the turn; an event of the wrong shape is a `ReplyProblem`."""
        try:
            self.turn.add(event, on_text)
        except (AttributeError, TypeError, KeyError, ValueError) as err:
            if not self._blames_event(err):
                raise  # a callback's own failure (the view, a preview): not the reply's
            raise ReplyProblem(f"sent an event that is not in its API's format (event "
                               f"{self.count}, {self._where()}): '{_event_text(event)}'",
                               "event") from None

    def reply(self) -> ModelReply:
        """Return the finished turn, or raise `ReplyProblem` when the stream was cut off."""
        if not self.turn.finished:
            ended = (f"after {_events(self.count)} without {self.turn.end_mark}; the last: "
                     f"'{_event_text(self.last)}'" if self.count else "before any event")
            raise ReplyProblem(f"stopped its reply before the end: the event stream "
                               f"({self._where()}) ended {ended}", "cut")
        return self.turn.reply()

    def failed(self, err: Exception) -> None:
        """Raise the `ReplyProblem` an error while reading the stream means, if it means one."""
        names = {cls.__name__ for cls in type(err).__mro__}
        if isinstance(err, ReplyProblem):
            return
        if isinstance(err, ValueError):  # json.JSONDecodeError, pydantic.ValidationError
            doc = getattr(err, "doc", None)
            what = "whose data is not JSON" if isinstance(doc, str) else \
                "that is not in its API's format"
            sample = clip(doc) if isinstance(doc, str) else clip(str(err))
            raise ReplyProblem(f"sent an event {what} (event {self.count + 1}, "
                               f"{self._where()}; {_first_line(err)}): '{sample}'",
                               "event") from None
        if "APIResponseValidationError" in names:  # the SDK could not build its event type
            body = getattr(err, "body", None)
            raise ReplyProblem(f"sent an event that is not in its API's format (event "
                               f"{self.count + 1}, {self._where()}): '{_json_text(body)}'",
                               "event") from None
        # A read timeout once events came: raw (httpx), or wrapped as the SDK's own timeout
        # (openai wraps one mid-stream too, which read as "did not answer" before).
        if "TimeoutException" in names or ("APITimeoutError" in names and self.count):
            raise ReplyProblem(f"stopped sending mid-reply (after {_events(self.count)}: "
                               f"{type(err).__name__})", "stalled") from None
        if "TransportError" in names or ("APIConnectionError" in names
                                         and "APITimeoutError" not in names):
            cause = err.__cause__ if "APIConnectionError" in names and err.__cause__ else err
            raise ReplyProblem(f"broke off its reply: the connection ended after "
                               f"{_events(self.count)} ({self._where()}; {type(cause).__name__}: "
                               f"{clip(str(cause))})", "cut") from None

    def _where(self) -> str:
        return f"content type {self.content_type}"

    def _blames_event(self, err: BaseException) -> bool:
        """Tell whether `err` was raised reading the event (adapter or SDK), not in a callback."""
        trace: TracebackType | None = err.__traceback__
        while trace is not None and trace.tb_next is not None:
            trace = trace.tb_next
        module = str(trace.tb_frame.f_globals.get("__name__", "")) if trace else ""
        return (module == type(self.turn).__module__
                or module.partition(".")[0] in _SHAPE_MODULES)


def _media_type(response: Body | AsyncBody) -> str:
    """Return the response's media type, lower case, without parameters."""
    return str(response.headers.get("content-type", "")).partition(";")[0].strip().lower()


def _sniff(content_type: str, status: int, body: bytes) -> None:
    """Let a mislabelled event stream through; raise `ReplyProblem` for anything else."""
    if re.match(rb"\s*(data|event|id|retry)?:", body):
        return  # events under another content type: the SDK's decoder reads them
    head = body.lstrip()[:15].lower()
    what = ("an empty body" if not head else "an HTML page"
            if "html" in content_type or head.startswith((b"<!doctype", b"<html", b"<"))
            else "a JSON body" if content_type.endswith("json") else "text")
    shown = f"content type {content_type}" if content_type else "no content type"
    begins = f"; it begins: '{clip(body)}'" if head else ""
    raise ReplyProblem(f"answered HTTP {status} with {what} ({shown}), not an event stream"
                       f"{begins}", "page")


def clip(data: bytes | str, limit: int = SAMPLE_CHARS) -> str:
    """Show the start of a reply on one line: printable, whitespace folded, `limit` long."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = "".join(c if c.isprintable() else " " for c in re.sub(r"\s+", " ", text)).strip()
    return text if len(text) <= limit else f"{text[:limit]}…"


def _events(count: int) -> str:
    return f"{count} event{'' if count == 1 else 's'}"


def _first_line(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _json_text(data: object) -> str:
    """Show decoded JSON data as JSON again, clipped."""
    try:
        return clip(json.dumps(data))
    except (TypeError, ValueError):
        return clip(repr(data))


def _event_text(event: object) -> str:
    """Show an event (its decoded JSON, or an SDK's pydantic model of it) as its JSON."""
    if isinstance(event, dict | list):
        with contextlib.suppress(TypeError, ValueError):
            return clip(json.dumps(event, separators=(",", ":"), ensure_ascii=False))
    dump = getattr(event, "model_dump_json", None)
    if callable(dump):
        with warnings.catch_warnings(), contextlib.suppress(Exception):
            warnings.simplefilter("ignore")
            return clip(str(dump(exclude_unset=True)))
    return clip(repr(event))


def shown_url(url: str) -> str:
    """Show a base URL without user, password, query or fragment (they may hold keys)."""
    scheme, _, rest = url.partition("://")
    if not rest:
        return clip(url.partition("?")[0])
    netloc, slash, path = rest.partition("/")
    path = re.split(r"[?#]", path, maxsplit=1)[0]
    return f"{scheme}://{netloc.rpartition('@')[2]}{slash}{path}".rstrip("/")


def bad_reply(problem: ReplyProblem, spec: ProviderSpec, url: str, timeout: float,
              secrets: Iterable[str]) -> AskError:
    """Build the ask error for a malformed reply of `spec`'s server at `url`."""
    where = f"{spec.label} at {shown_url(url)}"
    redact = Redactor(secrets)
    if problem.kind == "stalled":
        return ModelUnavailable(redact(f"{where} {problem.said}, silent for over {timeout:g} s."),
                                "Try again; for a slow model raise c.JupyterCI.request_timeout "
                                "(seconds).")
    return BadModelReply(redact(f"{where} {problem.said}."), _hint(spec, problem.kind))


def _hint(spec: ProviderSpec, kind: ProblemKind) -> str:
    """Say what to check: where the base URL is set, and what it must point at."""
    setting = (f"{spec.url_var} (or the base URL the Jupyter server uses)" if spec.url_var
               else "the provider's base URL")
    api = f"{spec.label}'s API, such as {spec.default_url or 'its documented URL'}" + (
        " or an OpenAI-compatible server's API (its /v1 endpoint, e.g. "
        "http://localhost:11434/v1)" if spec.keyless_with_url else "")
    if kind == "cut":
        return ("The server, or a proxy on the way, broke off the reply: try again. If it "
                f"keeps happening, check the server behind {setting} and any proxy. Not "
                "retried: part of the reply was already billed.")
    if kind == "event":
        return (f"The server behind {setting}, or a proxy on the way, does not stream "
                f"{spec.label}'s format: check that it is {api}. Not retried.")
    return (f"Check that {setting} points at {api}, and not a web page or a proxy's "
            "login. Not retried: a reply like this is not a passing failure.")


__all__ = ["EVENT_STREAM", "ReplyProblem", "Watch", "bad_reply", "clip", "shown_url"]
