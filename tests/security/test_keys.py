"""Key sources other than the environment: the key file and the keyring, and precedence."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.config import JupyterCI
from jupyter_ci.server.broker.broker import Broker
from jupyter_ci.server.broker.keys import (
    KeyFileError,
    keyring_keys,
    parse_key_file,
    read_key_file,
    stored_keys,
)

KEY = "sk-file-secret-0123456789abcdef"
LOG = logging.getLogger("test-keys")


def _write(tmp_path: Path, text: str, mode: int = 0o600, name: str = "keys.env") -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def no_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `import keyring` fail, as when the optional package is not installed."""
    monkeypatch.setitem(sys.modules, "keyring", None)


@pytest.fixture
def fake_keyring(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Install a stand-in `keyring` module; the dict holds its passwords and its calls."""
    state: dict[str, Any] = {"passwords": {}, "asked": [], "delay": 0.0, "error": None}

    def get_password(service: str, name: str) -> str | None:
        state["asked"].append((service, name))
        time.sleep(state["delay"])
        if state["error"] is not None:
            raise state["error"]
        return state["passwords"].get(name)

    monkeypatch.setitem(sys.modules, "keyring", types.SimpleNamespace(get_password=get_password))
    return state


def test_env_lines_with_export_quotes_and_comments(tmp_path: Path) -> None:
    text = (f"# keys\n\nexport OPENAI_API_KEY='{KEY}'\n"
            "ANTHROPIC_API_KEY = sk-ant-x # the second one\nOPENAI_BASE_URL=\"http://h/v1\"\n")
    assert parse_key_file(text, tmp_path) == {
        "OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": "sk-ant-x", "OPENAI_BASE_URL": "http://h/v1"}


def test_json_object(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _write(tmp_path, json.dumps({"ANTHROPIC_API_KEY": KEY, "GITHUB_TOKEN": "ghp_x"}))
    assert read_key_file(path, LOG) == {"ANTHROPIC_API_KEY": KEY}
    assert "ignoring GITHUB_TOKEN, not a provider variable" in caplog.text
    assert "ghp_x" not in caplog.text


@pytest.mark.parametrize(("text", "message"), [
    (f"OPENAI_API_KEY={KEY}\n{KEY}\n", "line 2: expected NAME=value"),
    ('{"OPENAI_API_KEY": 12}', "the value of OPENAI_API_KEY must be a string"),
    (f'{{"OPENAI_API_KEY": "{KEY}",}}', "not valid JSON"),
    ("export", "line 1: expected NAME=value"),
])
def test_malformed_files_say_where_not_what(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(KeyFileError) as caught:
        parse_key_file(text, tmp_path / "k")
    assert message in str(caught.value) and KEY not in str(caught.value)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o660])
def test_file_others_can_access_is_refused(
    tmp_path: Path, mode: int, caplog: pytest.LogCaptureFixture, no_keyring: None
) -> None:
    path = _write(tmp_path, f"OPENAI_API_KEY={KEY}\n", mode)
    assert stored_keys(str(path), {}, LOG) == {}
    assert f"Refusing the key file {path}" in caplog.text
    assert f"(mode {mode:03o})" in caplog.text and f"chmod 600 {path}" in caplog.text
    assert KEY not in caplog.text


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs chown")
def test_file_of_another_user_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, f"OPENAI_API_KEY={KEY}\n")
    os.chown(path, 65534, 65534)
    with pytest.raises(KeyFileError, match=r"belongs to uid 65534.*chmod 600"):
        read_key_file(path, LOG)


def test_missing_file_and_directory_are_errors(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="Cannot read the key file"):
        read_key_file(tmp_path / "absent", LOG)
    with pytest.raises(KeyFileError, match="not a regular file"):
        read_key_file(tmp_path, LOG)


def test_precedence_environment_then_file_then_keyring(
    tmp_path: Path, fake_keyring: dict[str, Any]
) -> None:
    path = _write(tmp_path, "OPENAI_API_KEY=from-file\nANTHROPIC_BASE_URL=http://file\n")
    fake_keyring["passwords"] = {"OPENAI_API_KEY": "from-keyring",
                                 "ANTHROPIC_API_KEY": "ant-from-keyring"}
    environ = {"OPENAI_API_KEY": "from-env", "OTHER": "1"}
    broker = Broker.take_from_environ(environ, stored_keys(str(path), environ, LOG))
    assert environ == {"OTHER": "1"}
    assert broker.providers["openai"].api_key == "from-env"
    assert broker.providers["anthropic"].api_key == "ant-from-keyring"
    assert broker.providers["anthropic"].base_url == "http://file"
    # Only what neither the environment nor the file had is asked of the keyring.
    assert fake_keyring["asked"] == [("jupyter-ci", "ANTHROPIC_API_KEY")]


def test_file_fills_in_when_the_environment_is_empty(tmp_path: Path, no_keyring: None) -> None:
    path = _write(tmp_path, f"OPENAI_API_KEY={KEY}\n")
    broker = Broker.take_from_environ({"OPENAI_API_KEY": " "}, stored_keys(str(path), {}, LOG))
    assert broker.providers["openai"].api_key == KEY
    assert KEY not in repr(broker)


def test_missing_keyring_package_is_silent(
    no_keyring: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert keyring_keys(["OPENAI_API_KEY"], LOG) == {}
    assert caplog.records == []


def test_slow_keyring_is_abandoned(
    fake_keyring: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    fake_keyring["delay"], fake_keyring["passwords"] = 2.0, {"OPENAI_API_KEY": KEY}
    started = time.monotonic()
    assert keyring_keys(["OPENAI_API_KEY"], LOG, timeout=0.2) == {}
    assert time.monotonic() - started < 1.5
    assert "did not answer within 0.2 s" in caplog.text


def test_failing_keyring_is_a_warning_and_no_backend_a_debug_note(
    fake_keyring: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_keyring["error"] = RuntimeError("dbus is gone")
    assert keyring_keys(["OPENAI_API_KEY"], LOG) == {}
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    no_backend = type("NoKeyringError", (RuntimeError,), {})
    fake_keyring["error"] = no_backend("No recommended backend was available.")
    caplog.clear()
    assert keyring_keys(["OPENAI_API_KEY"], LOG) == {}
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]


def test_key_file_setting_defaults_to_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUPYTER_CI_KEY_FILE", "/etc/keys.env")
    assert JupyterCI().key_file == "/etc/keys.env"
    assert JupyterCI().harden_process is True
