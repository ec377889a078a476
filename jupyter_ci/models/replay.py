"""A model that plays back a recorded ask (`-m replay:<file or folder>`): no key, no network.

The loop runs each replayed step for real and sends the results back; the replay answers
with the next recorded turn whatever the results were, so a recording replays faithfully
while the code behaves as it did when it was recorded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_ci import providers
from jupyter_ci.agent.errors import ModelConfigError
from jupyter_ci.agent.types import ModelReply, ModelRequest, OnText
from jupyter_ci.models.base import Endpoint
from jupyter_ci.models.recording import Recording, RecordingError, file_name, normal_prompt, read
from jupyter_ci.providers import ProviderSpec

HINT = ("Ask a real model instead (-m provider:model, or configure a key), or record this ask "
        "again with c.JupyterCI.record_dir set.")
# Enough of a recorded prompt to recognise it in a message.
PROMPT_CHARS = 80


@dataclass
class ReplayModel:
    """Replies with the turns of the recording of the ask's prompt, in order."""

    #: The file or folder as the user named it; relative to the working directory.
    source: str
    turns: list[ModelReply] | None = None
    _played: int = field(default=0, repr=False)

    @property
    def id(self) -> str:
        """Return `replay:<source>`."""
        return f"replay:{self.source}"

    @property
    def sees_images(self) -> bool:
        """Tell whether a replay is shown images: as `replay:` is in the provider table."""
        return providers.model_sees_images(self.id)

    def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Return the next recorded turn, streaming its text; fail clearly when none is left."""
        if self.turns is None:
            self.turns = list(self.load(request.prompt).turns)
        if not self.turns:
            raise ModelConfigError(
                f"The recording {self.source} has no reply left after its {self._played} "
                "turn(s): this ask went differently than when it was recorded.", HINT)
        reply = self.turns.pop(0)
        self._played += 1
        for piece in _pieces(reply.text):
            on_text(piece)
        # Nothing was spent on this turn: usage stays out of the ask's token budget.
        return dataclasses.replace(reply, input_tokens=0, output_tokens=0, cached_tokens=0)

    def load(self, prompt: str) -> Recording:
        """Find and read the recording for `prompt` (a folder holds one per prompt)."""
        path = Path(self.source)
        if not path.exists():
            raise ModelConfigError(
                f"Cannot replay {self.source}: there is no such file or folder (relative "
                f"paths start in the kernel's working directory, {Path.cwd()}).", HINT)
        if path.is_dir():
            path = path / file_name(prompt)
            if not path.exists():
                raise ModelConfigError(
                    f"No recording of this prompt in {self.source} (looked for "
                    f"{file_name(prompt)}; replays play back the exact prompt recorded).", HINT)
        try:
            recording = read(path)
        except RecordingError as error:
            raise ModelConfigError(f"Cannot replay {path}: {error}.", HINT) from None
        if normal_prompt(recording.prompt) != normal_prompt(prompt):
            shown = normal_prompt(recording.prompt)
            shown = shown if len(shown) <= PROMPT_CHARS else shown[:PROMPT_CHARS] + "…"
            raise ModelConfigError(
                f"The recording {path} is of another prompt: {shown!r}.",
                f"Replay it with that prompt. {HINT}")
        return recording


def _pieces(text: str, size: int = 40) -> list[str]:
    """Cut text into a few pieces, so it streams into the view as a model's would."""
    return [text[i:i + size] for i in range(0, len(text), size)]


def replay_model(spec: ProviderSpec, name: str, endpoint: Endpoint) -> ReplayModel:
    """Build the replay of `name` (the adapter factory of `replay:`); it reads it on first use."""
    return ReplayModel(name)
