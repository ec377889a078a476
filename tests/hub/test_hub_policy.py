"""The Hub's policy holds whatever a user does from their own server, and spending lasts.

One Hub for the module (tests/hub/conftest.py). Alice's budget is 100 tokens a day: one turn
uses it up. Each attack is what a user can do from their own server: their environment and
jupyter config (a Python file Jupyter runs at the server's start), a restart, and calls to
the Hub service with their own token and a body of their choosing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

import pytest

from tests.fakellm import Turn
from tests.hub.clients import (
    new_session,
    rest_ask,
    rest_ask_answering,
    start_kernel,
    text_of,
    write_user_config,
)
from tests.hub.conftest import ALICE, ALICE_TOKENS_PER_DAY, BOB, Team

pytestmark = pytest.mark.xdist_group("hub")
SERVICE = "access:services!service=jupyter-ci"
TURN = {"model": "openai:gpt-5-mini", "messages": [{"role": "user", "content": "hi"}]}
#: What a user's own config tries: lift every limit it can name, and be told another policy.
LIFTING = """
import json, os
os.environ["JUPYTER_CI_HUB_POLICY"] = json.dumps({"default": {}})
os.environ["JUPYTER_CI_HUB_SETTINGS"] = "{}"
os.environ["OPENAI_API_KEY"] = "sk-alice-own-guess"
c.JupyterCI.max_tokens_per_kernel = 0
c.JupyterCI.max_tokens_per_server = 0
c.JupyterCI.prices = {"openai:gpt-5-mini": {"input": 0, "output": 0}}
c.JupyterCI.approval_minimum = "never"
c.JupyterCI.approval = "never"
c.JupyterCI.session_sandbox = "never"
"""


def own_token(team: Team, user: str) -> str:
    """A token of `user` for their server and the Hub service, as their server's has."""
    return team.hub.token_for(user, [f"access:servers!user={user}", SERVICE])


def ended(events: list[tuple[str, Any]]) -> dict[str, Any]:
    """Return an ask's end event."""
    return dict(dict(events)["ask_end"])


def refused_for_budget(said: str) -> bool:
    """Say whether a message is the Hub's refusal for alice's daily token budget."""
    return (f"{ALICE} has used" in said and f"of {ALICE_TOKENS_PER_DAY}" in said
            and "tokens_per_day" in said and "resets at" in said and "UTC, in" in said)


def test_a_budget_that_runs_out_names_its_limit_and_when_it_resets(team: Team) -> None:
    token = own_token(team, ALICE)
    sid = new_session(team.hub, ALICE, token)["id"]
    team.fake.push(Turn("The first.", input_tokens=90, output_tokens=20))
    assert ended(rest_ask(team.hub, ALICE, token, sid, prompt="one"))["answer"] == "The first."
    calls = team.fake.calls()
    end = ended(rest_ask(team.hub, ALICE, token, sid, prompt="two"))
    assert end["status"] == "failed" and refused_for_budget(end["error"]["message"]), end
    assert team.fake.calls() == calls  # refused before any provider call


def test_the_budget_holds_across_a_restart_and_whatever_the_user_configures(
        team: Team) -> None:
    write_user_config(team.alice, LIFTING)
    team.hub.stop_server(ALICE)
    team.hub.start_server(ALICE)
    token = own_token(team, ALICE)
    calls = team.fake.calls()
    sid = new_session(team.hub, ALICE, token)["id"]
    end = ended(rest_ask(team.hub, ALICE, token, sid, prompt="again"))
    assert end["status"] == "failed" and refused_for_budget(end["error"]["message"]), end
    kernel = start_kernel(team.hub, team.alice, token)
    try:
        kernel.run("%load_ext jupyter_ci")
        _, outputs = kernel.run("%%ask\nand from a notebook")
    finally:
        kernel.close()
    assert refused_for_budget(text_of(outputs)), outputs
    assert team.fake.calls() == calls


def test_a_direct_call_to_the_service_is_judged_as_the_tokens_user(team: Team) -> None:
    token = team.hub.token_for(ALICE, [SERVICE])
    hub = team.hub
    # The body names no user: one that tries is refused, and the token's user is charged.
    status, said = hub.request("POST", "services/jupyter-ci/turn", token, {**TURN, "user": BOB})
    assert status == 400 and "takes no field 'user'" in said["error"]["message"], said
    status, said = hub.request("POST", "services/jupyter-ci/turn", token, TURN)
    assert status == 429 and refused_for_budget(said["error"]["message"]), said
    # A model the policy does not allow is refused, whoever is under their budget.
    bob = team.hub.token_for(BOB, [SERVICE])
    status, said = hub.request("POST", "services/jupyter-ci/turn", bob,
                               {**TURN, "model": "openai:gpt-5"})
    assert status == 400 and "does not let" in said["error"]["message"], said
    # One it allows, of a provider the service holds no key for, says so (not the panel).
    status, said = hub.request("POST", "services/jupyter-ci/turn", bob,
                               {**TURN, "model": "anthropic:claude-haiku-4-5"})
    assert status == 400 and said["error"]["message"] == (
        "The JupyterHub's jupyter-ci service holds no key for anthropic."), said
    # No token, a token without the scope, a service's token: refused before the body.
    for who in ("", team.hub.token_for(BOB, [f"access:servers!user={BOB}"]), team.hub.token):
        status, said = hub.request("POST", "services/jupyter-ci/turn", who or "none", TURN)
        assert status == 403, said
    assert team.fake.calls() == 0


def test_a_groups_floor_and_boxing_hold_whatever_the_users_config_says(team: Team) -> None:
    team.hub.api("POST", "groups/students", {"users": [BOB]})
    write_user_config(team.bob, LIFTING)
    try:
        team.hub.stop_server(BOB)
        team.hub.start_server(BOB)
        token = own_token(team, BOB)
        session = new_session(team.hub, BOB, token)
        assert session["sandboxed"] is True, session
        team.fake.push(Turn("", tool_calls=[("run_python", {"code": "print('ran')"})]),
                       Turn("Stopped."))
        events = rest_ask_answering(team.hub, BOB, token, session["id"], "stop",
                                    prompt="print something")
        assert "waiting_for_user" in dict(events), events
        assert ended(events)["status"] == "stopped", events
    finally:
        team.hub.api("DELETE", "groups/students")
        (team.bob.home / ".jupyter" / "jupyter_server_config.py").unlink()
        team.hub.stop_server(BOB)
        team.hub.start_server(BOB)


def test_spending_survives_the_services_restart(team: Team) -> None:
    token = team.hub.token_for(ALICE, [SERVICE])
    status, before = team.hub.request("GET", "services/jupyter-ci/spending", token)
    assert status == 200 and before["today"], before
    service = subprocess.run(["pgrep", "-P", str(team.hub.proc.pid), "-f", "jupyter_ci.hub"],
                             capture_output=True, text=True).stdout.split()
    assert len(service) == 1, service
    os.kill(int(service[0]), signal.SIGKILL)
    deadline = time.monotonic() + 90  # the Hub polls its services every 30 s
    status, after = 0, None
    while time.monotonic() < deadline:
        status, after = team.hub.request("GET", "services/jupyter-ci/spending", token)
        if status == 200:
            break
        time.sleep(1)
    assert status == 200 and after == before
    status, said = team.hub.request("POST", "services/jupyter-ci/turn", token, TURN)
    assert status == 429 and refused_for_budget(said["error"]["message"]), said
