"""Inputs shaped as an attacker would shape them: key-file lines, deep JSON, replay paths.

A base URL holding U+2028 (kept by the panel's URL input) or a line break, saved with
"Remember", used to add a line to the key file: after a restart the Anthropic key went to
the attacker's server. JSON nested 100 000 deep raised RecursionError (not ValueError) in
every route that parses a body: a 500. And a REST ask's `replay:<path>` read any
recording-shaped file the server could reach.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError, HTTPResponse

from jupyter_ci.agent.types import ModelReply, ToolCall
from jupyter_ci.models import recording
from jupyter_ci.server.broker.broker import Broker
from jupyter_ci.server.broker.keys import (
    KeyFileError,
    key_file_to_read,
    parse_key_file,
    read_key_file,
    remember_keys,
    stored_keys,
)
from tests.service_fixtures import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    PASTED,
    Upstream,
    broker_of,
    post_key,
    refusal,
    turn_body,
    turn_fetch,
)
from tests.test_sessions import call, new_session

LOG = logging.getLogger("test-input-attacks")
EVIL = "http://evil.example"
# The separators str.splitlines() splits on, and a tab, pasted inside a base URL.
SEPARATORS = ["\u2028", "\n", "\r", "\x85", "\t", "\u2029", "\x0b", "\x0c", "\x1c", "\x1e"]
BAD_URLS = ["http://[::1", "http://h:99999", "http://user:pw@h/", "ftp://h", "http://h/v1?x=1",
            "http://h/#f", "http://", "http://h:0/", "http://ok/v1 x", "http://ok\u200b/v1"]
DEEP = {"arrays": b"[" * 100_000 + b"]" * 100_000,
        "objects": b'{"a":' * 100_000 + b"1" + b"}" * 100_000}


@pytest.fixture
def ci_config() -> dict[str, Any]:
    """No kernel pool: only the tests that make a session start a kernel."""
    return {"session_pool": 0}


def restart_broker() -> Broker:
    """Build the broker a restarted server would: from the key file it reads at start."""
    return Broker.take_from_environ({}, stored_keys(key_file_to_read(""), {}, LOG))


# ------------------------------------------------- point 3: a base URL that writes lines


@pytest.mark.parametrize("separator", SEPARATORS)
async def test_a_base_url_cannot_add_a_line_to_the_key_file(
    jp_fetch: Any, jp_serverapp: Any, jp_data_dir: Path, upstream: Upstream, separator: str,
    capture: Any,
) -> None:
    status, reply = await post_key(jp_fetch, {
        "provider": "openai", "key": PASTED, "remember": True,
        "base_url": f"{upstream.url}/v1{separator}ANTHROPIC_BASE_URL={EVIL}"})
    assert status == 400 and "base URL" in reply["message"]
    assert EVIL not in reply["message"]
    # Nothing written, nothing held: the server's own key and URL stay as they were.
    assert list(jp_data_dir.rglob("keys.*")) == []
    broker = jp_serverapp.web_app.settings["jupyter_ci_broker"]
    assert broker.providers["openai"].api_key == OPENAI_KEY
    # And the next start sends the Anthropic key nowhere new.
    assert restart_broker().providers["anthropic"].base_url != EVIL


async def test_remember_writes_json_that_reads_back_exactly(
    jp_fetch: Any, jp_data_dir: Path, upstream: Upstream, capture: Any
) -> None:
    given = {"OPENAI_API_KEY": PASTED, "OPENAI_BASE_URL": f"{upstream.url}/v1"}
    status, reply = await post_key(jp_fetch, {"provider": "openai", "key": PASTED,
                                              "base_url": given["OPENAI_BASE_URL"],
                                              "remember": True})
    assert status == 200 and reply["saved"].startswith("saved to ")
    path = Path(reply["saved"].removeprefix("saved to "))
    assert path.name == "keys.json" and path.is_relative_to(jp_data_dir)
    assert path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text()) == given
    assert read_key_file(path, LOG) == given
    restarted = restart_broker().providers["openai"]
    assert (restarted.api_key, restarted.base_url) == (PASTED, given["OPENAI_BASE_URL"])


@pytest.mark.parametrize("separator", SEPARATORS)
def test_a_remembered_value_never_becomes_two_variables(tmp_path: Path, separator: str) -> None:
    path = tmp_path / "keys.json"
    value = f"http://ok/v1{separator}ANTHROPIC_BASE_URL={EVIL}"
    remember_keys(path, {"OPENAI_API_KEY": PASTED, "OPENAI_BASE_URL": value})
    # ASCII only: no raw separator can be in the file, whatever the value held.
    assert path.read_bytes().isascii()
    assert read_key_file(path, LOG) == {"OPENAI_API_KEY": PASTED, "OPENAI_BASE_URL": value}
    # Read back whole, the value is then refused at start, by name, as a bad base URL.
    broker = Broker.take_from_environ({}, read_key_file(path, LOG))
    assert broker.providers["anthropic"].base_url != EVIL
    assert "openai" not in [p.name for p in broker.configured()]
    problems = " ".join(broker.misconfigured())
    assert "OPENAI_BASE_URL" in problems and EVIL not in problems and PASTED not in problems


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\t"])
def test_a_hand_written_line_holding_a_separator_is_refused_by_its_number(
    tmp_path: Path, separator: str
) -> None:
    text = (f"OPENAI_API_KEY={PASTED}\r\n"
            f"OPENAI_BASE_URL=http://ok/v1{separator}ANTHROPIC_BASE_URL={EVIL}\n")
    with pytest.raises(KeyFileError) as caught:
        parse_key_file(text, tmp_path / "keys.env")
    message = str(caught.value)
    assert "line 2" in message and EVIL not in message and PASTED not in message


def test_hand_written_files_with_crlf_lines_still_read(tmp_path: Path) -> None:
    text = f"# mine\r\nexport OPENAI_API_KEY='{PASTED}'\r\nOPENAI_BASE_URL=http://ok/v1\r\n"
    assert parse_key_file(text, tmp_path / "keys.env") == {
        "OPENAI_API_KEY": PASTED, "OPENAI_BASE_URL": "http://ok/v1"}


def test_a_legacy_keys_env_is_read_when_keys_json_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path))
    folder = tmp_path / "jupyter_ci"
    folder.mkdir()
    legacy = folder / "keys.env"
    legacy.write_text(f"OPENAI_API_KEY={PASTED}\n")
    legacy.chmod(0o600)
    assert key_file_to_read("") == str(legacy)
    assert stored_keys(key_file_to_read(""), {}, LOG) == {"OPENAI_API_KEY": PASTED}
    # Remembering a key writes keys.json, keeping what keys.env held; keys.json wins then.
    from jupyter_ci.server.broker.keys import default_key_file

    remember_keys(default_key_file(), {"ANTHROPIC_API_KEY": ANTHROPIC_KEY})
    assert key_file_to_read("") == str(folder / "keys.json")
    assert stored_keys(key_file_to_read(""), {}, LOG) == {
        "OPENAI_API_KEY": PASTED, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}


@pytest.mark.parametrize("url", BAD_URLS)
async def test_a_bad_base_url_is_a_400_on_the_keys_route(
    jp_fetch: Any, jp_serverapp: Any, jp_data_dir: Path, url: str, capture: Any
) -> None:
    status, reply = await post_key(jp_fetch, {"provider": "openai", "key": PASTED,
                                              "base_url": url, "remember": True})
    assert status == 400 and "base URL" in reply["message"]
    assert list(jp_data_dir.rglob("keys.*")) == []
    broker = jp_serverapp.web_app.settings["jupyter_ci_broker"]
    assert broker.providers["openai"].api_key == OPENAI_KEY
    assert (await jp_fetch("jupyter-ci", "config")).code == 200


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_bad_base_url_from_the_environment_or_key_file_leaves_its_provider_unconfigured(
    url: str,
) -> None:
    for environ, stored in (({"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": url},
                             {}),
                            ({}, {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": url})):
        broker = Broker.take_from_environ(environ, stored)
        assert "anthropic" not in [p.name for p in broker.configured()]
        problems = [p for p in broker.misconfigured() if "ANTHROPIC_BASE_URL" in p]
        assert problems and ANTHROPIC_KEY not in " ".join(problems)


@pytest.mark.parametrize("server_env", [
    {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": url}
    for url in ("http://[::1", "http://me:s3cret@127.0.0.1:9/", f"http://127.0.0.1/v1\u2028{EVIL}",
                "http://127.0.0.1:99999", "ftp://127.0.0.1:9")
], indirect=True)
async def test_the_server_starts_with_a_bad_base_url_and_says_which(
    capfd: pytest.CaptureFixture[str], live_server: Any, jp_fetch: Any, token: str,
    upstream: Upstream, server_env: dict[str, str], capture: Any,
) -> None:
    # The extension logs through its own handler while the server starts (capfd is first).
    started = capfd.readouterr().err + "\n".join(
        r.getMessage() for r in capture.get_records("setup"))
    logged = [line for line in started.splitlines() if "ANTHROPIC_BASE_URL" in line]
    assert logged and "s3cret" not in started and EVIL not in started
    reply = json.loads((await jp_fetch("jupyter-ci", "config")).body)
    assert {p["name"]: p["configured"] for p in reply["providers"]}["anthropic"] is False
    status, lines = await turn_fetch(turn_body("anthropic:claude-test"), token)
    kind, message = refusal(lines)
    assert (status, kind) == (400, "ModelConfigError") and "ANTHROPIC_BASE_URL" in message
    assert "s3cret" not in message and EVIL not in message
    assert upstream.requests == []


# ------------------------------------------------------- point 6: deep JSON, never a 500


async def fetch(jp_fetch: Any, *path: str, body: bytes) -> HTTPResponse:
    """POST raw bytes to a jupyter-ci route; return the response, even an error."""
    try:
        response: HTTPResponse = await jp_fetch("jupyter-ci", *path, method="POST", body=body,
                                                request_timeout=60)
        return response
    except HTTPClientError as err:
        assert err.response is not None
        return err.response


@pytest.mark.parametrize("shape", list(DEEP))
async def test_deep_json_to_the_keys_route_is_a_400(
    jp_fetch: Any, shape: str, capture: Any
) -> None:
    response = await fetch(jp_fetch, "keys", body=DEEP[shape])
    assert response.code == 400
    assert "nested" in json.loads(response.body)["message"]
    assert (await jp_fetch("jupyter-ci", "config")).code == 200


async def test_a_body_not_in_utf8_is_a_400_on_the_keys_route(jp_fetch: Any) -> None:
    body = json.dumps({"provider": "openai", "key": PASTED}).encode("utf-16")
    response = await fetch(jp_fetch, "keys", body=body)
    assert response.code == 400 and "UTF-8" in json.loads(response.body)["message"]


async def test_deep_json_to_every_session_route_is_a_400(jp_fetch: Any) -> None:
    sid = (await new_session(jp_fetch))["id"]
    for path in ((), (sid, "execute"), (sid, "ask")):
        for body in (*DEEP.values(), b'{"code": "1", "x": ' + b"[" * 129 + b"]" * 129 + b"}"):
            status, reply = await call(jp_fetch, "POST", *path, raw=body)
            assert status == 400, (path, reply)
            assert reply["reason"] == "bad_json" and "nested" in reply["message"]
    # Not one session more, and the session still runs code.
    status, listed = await call(jp_fetch, "GET")
    assert [s["id"] for s in listed] == [sid]
    status, result = await call(jp_fetch, "POST", sid, "execute", body={"code": "6 * 7"})
    assert status == 200 and result["outputs"][0]["data"]["text/plain"] == "42"


async def test_a_session_body_not_in_utf8_is_a_400(jp_fetch: Any) -> None:
    status, reply = await call(jp_fetch, "POST", raw=json.dumps({}).encode("utf-16"))
    assert status == 400 and reply["reason"] == "bad_json" and "UTF-8" in reply["message"]


@pytest.mark.parametrize("ci_config", [{"session_pool": 0, "max_tokens_per_kernel": 1000}])
@pytest.mark.parametrize("shape", list(DEEP))
async def test_deep_json_to_the_model_service_is_a_400(
    live_server: Any, upstream: Upstream, token: str, shape: str, capture: Any
) -> None:
    status, lines = await turn_fetch(DEEP[shape], token)
    kind, message = refusal(lines)
    assert (status, kind) == (400, "ModelConfigError") and "nested" in message
    assert upstream.requests == []
    assert (await turn_fetch(turn_body(), token))[0] == 200


SSE = {"Content-Type": "text/event-stream"}


@pytest.mark.parametrize("ci_config", [{"session_pool": 0, "max_tokens_per_kernel": 1000}])
async def test_a_deep_provider_reply_ends_the_turn_and_the_service_goes_on(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    # The server's SDK parses the provider's events now: one nested 100 000 deep.
    upstream.replies = [(200, SSE, [b'data: {"usage": ' + DEEP["arrays"] + b"}\n\n",
                                    b"data: [DONE]\n\n"])]
    status, lines = await turn_fetch(turn_body(), token)
    assert not any("reply" in line for line in lines), lines
    budget = broker_of(live_server).budget.tokens
    assert budget.server_reserved == 0 and not budget.kernel_reserved
    assert (await turn_fetch(turn_body(), token))[0] == 200
    # A provider's failure, in our words: a 502 (or an error line), never a server bug's 500.
    assert status in (200, 502), (status, lines)
    assert lines[-1]["error"]["type"] == "ModelUnavailable"
    assert "Uncaught exception" not in capture.text


def test_the_json_helper_measures_nesting_outside_strings_only() -> None:
    from jupyter_ci.server.jsonbody import MAX_DEPTH, BadJSON, parse_json

    assert parse_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    with pytest.raises(BadJSON, match="nested more than"):
        parse_json(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    brackets = json.dumps({"code": "[" * 5000 + "{" * 5000 + '\\"['})
    assert parse_json(brackets.encode())["code"].startswith("[[[")
    with pytest.raises(BadJSON, match="lone surrogate"):
        parse_json(b'{"a": "\\uD800"}')
    assert parse_json(b'{"a": "\\uD800"}', surrogates=True) == {"a": "\ud800"}


@pytest.mark.parametrize("body", [
    b'"' + b'\\"' * 500_000 + b"[" * 200,  # an unterminated string of escaped quotes
    b'"\\' + b'"\\"' * 300_000 + b"{" * 200,
    b"[" * 1_000_000,
])
def test_the_nesting_check_takes_linear_time(body: bytes) -> None:
    from jupyter_ci.server.jsonbody import BadJSON, parse_json

    started = time.monotonic()
    with pytest.raises(BadJSON):
        parse_json(body)
    assert time.monotonic() - started < 1.0


# ------------------------------------------------ point 6: replay paths stay in the session

PROMPT = "Compute the answer."


def write_recording(folder: Path, name: str = "") -> Path:
    """Write a recording of PROMPT: one step that sets `answer`, then the reply."""
    turns = (ModelReply("Computing.", (ToolCall("c1", "run_python", json.dumps(
                 {"code": "answer = 6 * 7\nprint('answer', answer)"})),)),
             ModelReply("The answer is **42**."))
    path = recording.write(folder, recording.Recording(PROMPT, "openai:gpt-test", turns))
    return path.rename(folder / name) if name else path


async def ask(jp_fetch: Any, sid: str, model: str) -> tuple[int, Any]:
    """POST an ask with `model`; return the status and the JSON error or the SSE text."""
    return await call(jp_fetch, "POST", sid, "ask", body={"prompt": PROMPT, "model": model},
                      request_timeout=120)


def session_dir(jp_serverapp: Any, sid: str) -> Path:
    return Path(jp_serverapp.web_app.settings["jupyter_ci_sessions"].directory(sid))


async def test_a_rest_replay_path_must_stay_in_the_session_directory(
    jp_fetch: Any, jp_serverapp: Any, tmp_path: Path
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    directory = session_dir(jp_serverapp, sid)
    outside = write_recording(tmp_path / "elsewhere")
    (directory / "link.json").symlink_to(outside)
    (directory / "linked").symlink_to(outside.parent, target_is_directory=True)
    write_recording(directory.parent)  # beside the session: another session's, say
    for model in ("replay:/etc/passwd", f"replay:{outside}", f"replay:{outside.parent}",
                  "replay:../x", f"replay:../{outside.name}", "replay:link.json",
                  "replay:linked", f"replay:linked/{outside.name}", "replay:missing.json",
                  "replay:a\x00b", f"replay:{directory}/../{outside.name}"):
        status, reply = await ask(jp_fetch, sid, model)
        assert status == 400, (model, reply)
        assert "session's own directory" in reply["message"], model
        if "link" in model:  # where a link points is not told
            assert str(outside.parent) not in reply["message"]
    status, listed = await call(jp_fetch, "GET", sid)
    assert status == 200 and listed["executions"] == 0


async def test_a_recording_in_the_session_directory_replays(
    jp_fetch: Any, jp_serverapp: Any
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    directory = session_dir(jp_serverapp, sid)
    write_recording(directory / "recordings")
    shutil.copy(next((directory / "recordings").iterdir()), directory / "mine.json")
    for model in ("replay:mine.json", "replay:recordings", "replay:./recordings/"):
        status, body = await ask(jp_fetch, sid, model)
        assert status == 200, (model, body)
        result = json.loads(body.decode().rsplit("event: result\ndata: ", 1)[1])
        assert result["status"] == "done" and result["answer"] == "The answer is **42**."
    status, ran = await call(jp_fetch, "POST", sid, "execute", body={"code": "answer"})
    assert ran["outputs"][0]["data"]["text/plain"] == "42"


@pytest.fixture
def record_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "records"
    write_recording(folder)
    return folder


async def test_a_rest_replay_may_read_the_record_dir(
    jp_fetch: Any, jp_serverapp: Any, record_dir: Path, tmp_path: Path
) -> None:
    jp_serverapp.web_app.settings["jupyter_ci"].record_dir = str(record_dir)
    sid = (await new_session(jp_fetch))["id"]
    recorded = next(record_dir.iterdir())
    for model in (f"replay:{record_dir}", f"replay:{recorded}"):
        status, body = await ask(jp_fetch, sid, model)
        assert status == 200, (model, body)
        assert '"status": "done"' in body.decode()
    write_recording(tmp_path / "other")
    status, reply = await ask(jp_fetch, sid, f"replay:{tmp_path / 'other'}")
    assert status == 400 and str(record_dir) in reply["message"]
