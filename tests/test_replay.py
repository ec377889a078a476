"""Recording asks (c.JupyterCI.record_dir) and playing them back (-m replay:<path>), in-process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from jupyter_ci.agent.errors import ModelConfigError
from jupyter_ci.agent.types import Message, ModelRequest
from jupyter_ci.models import recording
from jupyter_ci.models.replay import ReplayModel
from jupyter_ci.models.resolve import ModelSettings, default_model_id, resolve_model
from tests.nbrun import TEST_KEY
from tests.test_magic_inprocess import Ask, answer, code, script

# The in-process shell fixture, re-exported so pytest finds it here.
from tests.test_magic_inprocess import ask as ask

PROMPT = "Make a table of squares and plot it."
STEPS = [code("squares = {n: n * n for n in range(5)}\nprint(squares)", "Making the table."),
         code("total = sum(squares.values())\nprint('total', total)"),
         answer("The squares of 0-4 add up to **30**.")]


def record(ask: Ask, request: pytest.FixtureRequest, folder: str = "rec") -> Path:
    """Run the scripted ask with record_dir set; return the one recording it wrote."""
    model_id, _ = script(request, *STEPS)
    ask.ok(f'%config JupyterCI.record_dir = "{folder}"')
    ask.ok(f"%%ask -m {model_id}\n{PROMPT}")
    ask.ok('%config JupyterCI.record_dir = ""')
    files = list(Path(folder).iterdir())
    assert [f.name for f in files] == [recording.file_name(PROMPT)]
    return files[0]


def test_an_ask_is_recorded_turn_by_turn_without_keys_or_context(
        ask: Ask, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    ask.ok("secret_rows = ['do-not-record-me']")
    saved = record(ask, request)
    data = json.loads(saved.read_text())
    assert data["format"] == "jupyter-ci-recording" and data["version"] == 1
    assert data["prompt"] == PROMPT and data["model"].startswith("scripted:")
    assert [t["text"] for t in data["turns"]] == ["Making the table.", "",
                                                   "The squares of 0-4 add up to **30**."]
    call = data["turns"][0]["tool_calls"][0]
    assert call["name"] == "run_python" and "squares = {n: n * n" in json.loads(
        call["arguments"])["code"]
    raw = saved.read_text()
    # Only what the model sent: no key, no kernel context, no outputs of the code.
    assert TEST_KEY not in raw and "do-not-record-me" not in raw and "total 30" not in raw


def test_a_replay_runs_the_recorded_code_in_the_kernel_without_a_key(
        ask: Ask, request: pytest.FixtureRequest) -> None:
    saved = record(ask, request)
    ask.ok("%reset -f")
    ask.screen.clear()
    ask.ok(f"%%ask -m replay:{saved}\n{PROMPT}")
    assert ask.ns["total"] == 30
    assert "total 30" in ask.screen.stream()
    shown = "\n".join(ask.screen.markdown())
    assert "Making the table." in shown and "add up to **30**" in shown


def test_a_folder_replays_the_recording_of_the_asks_prompt(
        ask: Ask, request: pytest.FixtureRequest) -> None:
    record(ask, request, "recordings")
    # Re-wrapped words are the same prompt.
    ask.ok("%%ask -m replay:recordings\nMake a table of squares\n  and plot it.")
    assert ask.ns["squares"][4] == 16
    with pytest.raises(ModelConfigError, match="No recording of this prompt in recordings"):
        ReplayModel("recordings").load("Something never recorded.")


def test_a_replayed_ask_is_not_recorded_again(ask: Ask, request: pytest.FixtureRequest) -> None:
    saved = record(ask, request)
    before = saved.read_text()
    ask.ok(f'%config JupyterCI.record_dir = "{saved.parent}"')
    ask.ok(f"%%ask -m replay:{saved}\n{PROMPT}")
    assert saved.read_text() == before and len(list(saved.parent.iterdir())) == 1


def test_another_prompt_or_a_used_up_recording_fails_saying_what_to_do(
        ask: Ask, request: pytest.FixtureRequest) -> None:
    saved = record(ask, request)
    result = ask.run(f"%%ask -m replay:{saved}\nSomething else.")
    error = result.error_in_exec
    assert isinstance(error, ModelConfigError) and "another prompt" in str(error)
    assert "Make a table of squares" in str(error) and "-m provider:model" in str(error)
    # The code fails now where it worked when recorded, so the ask goes on longer.
    data = json.loads(saved.read_text())
    data["turns"] = data["turns"][:1]
    saved.write_text(json.dumps(data))
    error = ask.run(f"%%ask -m replay:{saved}\n{PROMPT}").error_in_exec
    assert isinstance(error, ModelConfigError) and "no reply left after its 1 turn" in str(error)


def request_for(prompt: str) -> ModelRequest:
    return ModelRequest("", (Message("user", prompt),), (), prompt=prompt)


@pytest.mark.parametrize(("name", "content", "reason"), [
    ("notes.txt", b'{"format": "jupyter-ci-recording"}', "not a .json file"),
    ("bad.json", b"TOPSECRET not json", "not valid UTF-8 JSON"),
    ("other.json", b'{"TOPSECRET": 1}', 'no "format": "jupyter-ci-recording"'),
    ("newer.json", b'{"format": "jupyter-ci-recording", "version": 9}', "version"),
    ("turns.json", json.dumps({"format": "jupyter-ci-recording", "version": 1, "prompt": "p",
                               "model": "m", "turns": [{"text": 5}]}).encode(),
     "turn 1 is malformed"),
    ("deep.json", b"[" * 100_000, "not valid UTF-8 JSON"),
    ("big.json", b" " * (recording.MAX_BYTES + 1), "larger than"),
    ("missing.json", None, "no such file or folder"),
])
def test_only_recordings_of_our_format_are_read_and_errors_never_quote_the_file(
        tmp_path: Path, name: str, content: bytes | None, reason: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ModelConfigError) as error:
        ReplayModel(str(path)).complete(request_for("p"), lambda _: None)
    message = str(error.value)
    assert reason in message and "TOPSECRET" not in message
    assert "Traceback" not in "".join(error.value._render_traceback_())


def test_a_fifo_or_a_device_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    device = tmp_path / "zero.json"
    device.symlink_to("/dev/zero")
    for path in (fifo, device):
        with pytest.raises(ModelConfigError, match="it is not a regular file"):
            ReplayModel(str(path)).complete(request_for("p"), lambda _: None)
    with pytest.raises(ModelConfigError, match="no such file or folder"):
        ReplayModel("recordings").complete(request_for("p"), lambda _: None)


def test_the_fallback_model_is_used_only_when_no_model_is_configured(tmp_path: Path) -> None:
    settings = ModelSettings(fallback="replay:recordings")
    assert resolve_model(None, settings, {}).id == "replay:recordings"
    # Behind a server whose broker holds no key (Binder before a key is given): no model either.
    brokered = {"JUPYTER_CI_BROKER_URL": "http://127.0.0.1:1/b", "JUPYTER_CI_BROKER_TOKEN": "t",
                "JUPYTER_CI_BROKER_PROVIDERS": ""}
    assert resolve_model(None, settings, brokered).id == "replay:recordings"
    assert default_model_id(settings, {**brokered, "JUPYTER_CI_BROKER_PROVIDERS": "anthropic"}
                            ) == "anthropic:claude-sonnet-5-5"
    assert resolve_model(None, settings, {"OPENAI_API_KEY": TEST_KEY}).id == "openai:gpt-5.5"
    assert default_model_id(ModelSettings("openai:x", fallback="replay:r"), {}) == "openai:x"
    with pytest.raises(ModelConfigError, match="No model is configured"):
        resolve_model(None, ModelSettings(), {})
