"""Recordings of asks: the model's replies turn by turn, as JSON files named by the prompt.

A recording holds only what the model sent back (already shown to the user), the prompt and
the model id: never keys, headers, the kernel's context or the code's outputs. Recordings are
read from paths a notebook names (`-m replay:<path>`), so reading one is strict: a regular
`.json` file of bounded size in exactly this format, or a `RecordingError` saying what is
wrong without quoting the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from jupyter_ci.agent.types import ModelReply, ModelRequest, OnText, ToolCall
from jupyter_ci.models.base import ChatModel

#: The `format` field every recording carries, and the version this code writes and reads.
FORMAT = "jupyter-ci-recording"
VERSION = 1
SUFFIX = ".json"
# A recording is a few kilobytes; a bound keeps a named device or a huge file from being read.
MAX_BYTES = 5_000_000


class ToolCallJSON(TypedDict):
    """A recorded tool call."""

    id: str
    name: str
    arguments: str


class TurnJSON(TypedDict):
    """A recorded turn: the model's reply and its token usage."""

    text: str
    tool_calls: list[ToolCallJSON]
    input_tokens: int
    output_tokens: int
    cached_tokens: int


class RecordingJSON(TypedDict):
    """A recording file."""

    format: str
    version: int
    prompt: str
    model: str
    turns: list[TurnJSON]


class RecordingError(ValueError):
    """A path that is not a readable recording of this format; the message says why."""


def normal_prompt(prompt: str) -> str:
    """Return the prompt with its whitespace collapsed: re-wrapped prompts still match."""
    return " ".join(prompt.split())


def file_name(prompt: str) -> str:
    """Name the recording of a prompt by a short hash of it."""
    return hashlib.sha256(normal_prompt(prompt).encode()).hexdigest()[:12] + SUFFIX


@dataclass(frozen=True)
class Recording:
    """One ask as recorded: its prompt, the model that answered, and the model's turns."""

    prompt: str
    model: str
    turns: tuple[ModelReply, ...] = ()

    def to_json(self) -> RecordingJSON:
        """Return the JSON form written to disk."""
        return {"format": FORMAT, "version": VERSION, "prompt": self.prompt,
                "model": self.model, "turns": [_turn_json(turn) for turn in self.turns]}

    @classmethod
    def from_json(cls, data: object) -> Recording:
        """Check and build a recording, raising RecordingError naming what is wrong."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise RecordingError(f"it has no \"format\": \"{FORMAT}\"")
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or not (
                1 <= version <= VERSION):
            raise RecordingError(f"its version is not one this jupyter-ci reads ({VERSION})")
        prompt, model, turns = data.get("prompt"), data.get("model"), data.get("turns")
        if not isinstance(prompt, str) or not isinstance(model, str):
            raise RecordingError("its prompt or model is not a string")
        if not isinstance(turns, list):
            raise RecordingError("its turns are not a list")
        return cls(prompt, model, tuple(_turn(item, n) for n, item in enumerate(turns, 1)))


def _turn_json(reply: ModelReply) -> TurnJSON:
    return {"text": reply.text,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                           for c in reply.tool_calls],
            "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
            "cached_tokens": reply.cached_tokens}


def _turn(item: object, number: int) -> ModelReply:
    """Build one recorded turn, or say which one is malformed."""
    if isinstance(item, dict):
        text, calls = item.get("text", ""), item.get("tool_calls", [])
        # cached_tokens: absent from recordings made before it was kept.
        tokens = [item.get(name, 0) for name in ("input_tokens", "output_tokens",
                                                 "cached_tokens")]
        if (isinstance(text, str) and isinstance(calls, list)
                and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens)
                and all(isinstance(c, dict) and all(isinstance(c.get(k), str)
                                                    for k in ("id", "name", "arguments"))
                        for c in calls)):
            return ModelReply(text, tuple(ToolCall(c["id"], c["name"], c["arguments"])
                                          for c in calls), *tokens)
    raise RecordingError(f"its turn {number} is malformed")


def read(path: Path) -> Recording:
    """Read a recording file, raising RecordingError (never with the file's content)."""
    if path.suffix != SUFFIX:
        raise RecordingError(f"it is not a {SUFFIX} file")
    try:
        # Non-blocking: opening a FIFO someone named must not hang the kernel.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise RecordingError("there is no such file") from None
    except OSError as error:
        raise RecordingError(f"it cannot be read ({error.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordingError("it is not a regular file")
        raw = file.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise RecordingError(f"it is larger than {MAX_BYTES:,} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RecordingError("it is not valid UTF-8 JSON") from None
    return Recording.from_json(data)


def write(folder: Path, recording: Recording) -> Path:
    """Write (or replace) the recording of its prompt in `folder`, atomically; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / file_name(recording.prompt)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".recording-", suffix=SUFFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(recording.to_json(), file, indent=1, ensure_ascii=False)
            file.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


@dataclass
class RecordingModel:
    """Wrap a model for one ask, writing its replies to `folder` after every turn."""

    inner: ChatModel
    folder: Path
    turns: list[ModelReply] = field(default_factory=list)
    _warned: bool = False

    @property
    def id(self) -> str:
        """Return the wrapped model's id: recording is invisible to the ask."""
        return self.inner.id

    @property
    def sees_images(self) -> bool:
        """Tell whether the wrapped model takes images."""
        return self.inner.sees_images

    def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Call the wrapped model and record its reply (a failed write only warns)."""
        reply = self.inner.complete(request, on_text)
        self.turns.append(reply)
        # Written after each turn, so an ask that fails or is interrupted is still recorded.
        try:
            write(self.folder, Recording(request.prompt, self.inner.id, tuple(self.turns)))
        except OSError as error:
            if not self._warned:
                self._warned = True
                warnings.warn(f"jupyter-ci could not write the recording in {self.folder}: "
                              f"{error.strerror or error}", RuntimeWarning, stacklevel=2)
        return reply
