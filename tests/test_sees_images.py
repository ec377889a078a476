"""Every model says whether it is shown images; `vision = auto` asks the model, not its id."""

from __future__ import annotations

from pathlib import Path

from jupyter_ci import providers
from jupyter_ci.models.anthropic import AnthropicChatModel
from jupyter_ci.models.base import ChatModel, Endpoint
from jupyter_ci.models.broker import ENV_PROVIDERS, ENV_TOKEN, ENV_URL
from jupyter_ci.models.openai import OpenAIChatModel
from jupyter_ci.models.recording import RecordingModel
from jupyter_ci.models.replay import ReplayModel
from jupyter_ci.models.resolve import ModelSettings, resolve_model, vision_enabled
from jupyter_ci.models.scripted import ScriptedModel
from jupyter_ci.models.service import ServiceModel
from jupyter_ci.providers import model_sees_images

OPENAI, ANTHROPIC = providers.PROVIDERS["openai"], providers.PROVIDERS["anthropic"]
ENDPOINT = Endpoint("k")


def models(tmp_path: Path) -> list[tuple[ChatModel, bool]]:
    """Return one model of each kind, and whether its provider's table says it sees images."""
    return [
        (OpenAIChatModel(OPENAI, "gpt-4o", ENDPOINT), True),
        (OpenAIChatModel(OPENAI, "gpt-3.5-turbo", ENDPOINT), False),
        (AnthropicChatModel(ANTHROPIC, "claude-sonnet-4-5", ENDPOINT), True),
        (AnthropicChatModel(ANTHROPIC, "claude-2.1", ENDPOINT), False),
        (ServiceModel(OPENAI, "o3-mini", ENDPOINT), False),
        (ServiceModel(ANTHROPIC, "claude-3-haiku-20240307", ENDPOINT), True),
        (ScriptedModel([]), True),
        (ScriptedModel([], id="openai:gpt-4"), False),  # a double standing for a text-only one
        (ReplayModel("recordings"), True),
        (RecordingModel(ServiceModel(OPENAI, "gpt-4-0613", ENDPOINT), tmp_path), False),
        (RecordingModel(ScriptedModel([]), tmp_path), True),
    ]


def test_a_model_says_whether_it_sees_images_and_vision_auto_asks_it(tmp_path: Path) -> None:
    for model, sees in models(tmp_path):
        assert model.sees_images is sees, model
        assert vision_enabled("auto", model) is sees
        assert vision_enabled("on", model) and not vision_enabled("off", model)


def test_an_id_is_read_by_the_same_rule_as_its_model(tmp_path: Path) -> None:
    for model, sees in models(tmp_path):
        assert model_sees_images(model.id) is sees, model.id


def test_a_resolved_model_sees_images_as_its_provider_table_says(tmp_path: Path) -> None:
    brokered = {ENV_URL: "http://127.0.0.1:1/b", ENV_TOKEN: "t", ENV_PROVIDERS: "openai"}
    assert not resolve_model("openai:gpt-3.5-turbo", ModelSettings(), brokered).sees_images
    recorded = resolve_model("openai:gpt-4.1", ModelSettings(record_dir=str(tmp_path)),
                             {"OPENAI_API_KEY": "k"})
    assert isinstance(recorded, RecordingModel) and recorded.sees_images
