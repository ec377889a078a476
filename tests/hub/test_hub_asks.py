"""Asks under a real JupyterHub: through its jupyter-ci service, with no key in users' reach.

One Hub for the module (tests/hub/conftest.py): two Unix users whose servers run as them,
the fake provider behind the Hub's service, which alone holds the key.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.fakellm import Turn
from tests.hub.clients import (
    command_of,
    environ_of,
    files_holding,
    new_session,
    processes_of,
    rest_ask,
    start_kernel,
    text_of,
)
from tests.hub.conftest import ADMIN, ALICE, BOB, Team
from tests.hub.harness import HUB_KEY

pytestmark = pytest.mark.xdist_group("hub")
SERVICE = "access:services!service=jupyter-ci"


def server_token(team: Team, user: str) -> str:
    """A token of `user` that reaches their own server (as their browser's does)."""
    return team.hub.token_for(user, [f"access:servers!user={user}"])


def spending(team: Team, user: str) -> dict[str, Any]:
    """Return `user`'s spending as the Hub service tells them."""
    status, body = team.hub.request("GET", "services/jupyter-ci/spending",
                                    team.hub.token_for(user, [SERVICE]))
    assert status == 200, body
    return dict(body)


def turns_of(spent: dict[str, Any]) -> int:
    """Count the turns of a UserSpending's day."""
    return sum(m["turns"] for m in spent["today"])


def test_a_notebook_ask_goes_through_the_hub_service(team: Team) -> None:
    before = turns_of(spending(team, BOB))
    kernel = start_kernel(team.hub, team.bob, server_token(team, BOB))
    try:
        team.fake.push(Turn("Hello from the Hub's model."))
        assert kernel.run("%load_ext jupyter_ci")[0] == "ok"
        status, outputs = kernel.run("%%ask\nsay hello")
    finally:
        kernel.close()
    assert status == "ok", outputs
    assert "Hello from the Hub's model." in text_of(outputs)
    # The provider saw the Hub's key and the policy's model; bob was charged.
    assert team.fake.requests[-1].headers["authorization"] == f"Bearer {HUB_KEY}"
    assert team.fake.requests[-1].body["model"] == "gpt-5-mini"
    assert turns_of(spending(team, BOB)) == before + 1


def test_a_rest_ask_goes_through_the_hub_service(team: Team) -> None:
    token = server_token(team, BOB)
    sid = new_session(team.hub, BOB, token)["id"]
    team.fake.push(Turn("Answered by the Hub."))
    events = rest_ask(team.hub, BOB, token, sid, prompt="answer me")
    end = dict(events)["ask_end"]
    assert end["answer"] == "Answered by the Hub.", events
    assert team.fake.requests[-1].headers["authorization"] == f"Bearer {HUB_KEY}"
    assert end["usage"]["cost_usd"] > 0  # priced by the Hub's table (gpt-5-mini)


def test_the_key_is_in_no_users_process_or_file(team: Team) -> None:
    for user in (team.alice, team.bob):
        token = server_token(team, user.name)
        start_kernel(team.hub, user, token).close()
        new_session(team.hub, user.name, token)
    checked = 0
    for user in (team.alice, team.bob):
        for pid in processes_of(user):
            env = environ_of(pid)
            assert not [k for k, v in env.items() if HUB_KEY in v], command_of(pid)
            if "ipykernel" in command_of(pid):
                checked += 1
                # Nor the server's Hub token, with which a kernel could call the service.
                assert "JUPYTERHUB_API_TOKEN" not in env, command_of(pid)
        assert files_holding(user.home, HUB_KEY) == []
    assert checked >= 4  # a notebook kernel and a session's of each user were looked at


def test_a_kernel_cannot_read_its_servers_environment(team: Team) -> None:
    server = next(pid for pid in processes_of(team.bob) if "singleuser" in command_of(pid))
    as_bob = ["setpriv", f"--reuid={team.bob.uid}", f"--regid={team.bob.uid}",
              "--clear-groups", "cat", f"/proc/{server}/environ"]
    done = subprocess.run(as_bob, capture_output=True)
    assert done.returncode != 0 and b"JUPYTERHUB_API_TOKEN" not in done.stdout


def test_one_user_cannot_reach_anothers_sessions_or_spending(team: Team) -> None:
    alice = team.hub.token_for(ALICE, [f"access:servers!user={ALICE}", SERVICE])
    bob = server_token(team, BOB)
    sid = new_session(team.hub, BOB, bob)["id"]
    for path in ("jupyter-ci/sessions", f"jupyter-ci/sessions/{sid}", "jupyter-ci/spending"):
        status, _ = team.hub.request("GET", f"user/{BOB}/{path}", alice)
        assert status == 403, path
    status, _ = team.hub.request("POST", f"user/{BOB}/jupyter-ci/sessions/{sid}/execute",
                                 alice, {"code": "1"})
    assert status == 403
    status, mine = team.hub.request("GET", "services/jupyter-ci/spending", alice)
    assert status == 200 and mine["user"] == ALICE
    status, _ = team.hub.request("GET", "services/jupyter-ci/admin/spending", alice)
    assert status == 403
    # Through her own server, alice sees her own spending (the panel's route).
    status, own = team.hub.request("GET", f"user/{ALICE}/jupyter-ci/spending",
                                   server_token(team, ALICE))
    assert status == 200 and own["user"] == ALICE, own


def test_the_admin_sees_everyones_spending(team: Team) -> None:
    # Both users spend here: the test holds alone (-k, another worker's order).
    for user, answer in ((ALICE, "Alice's answer."), (BOB, "Bob's answer.")):
        token = server_token(team, user)
        sid = new_session(team.hub, user, token)["id"]
        team.fake.push(Turn(answer))
        assert dict(rest_ask(team.hub, user, token, sid, prompt="hi"))["ask_end"]["answer"]
    admin = team.hub.token_for(ADMIN, [SERVICE])
    status, everyone = team.hub.request("GET", "services/jupyter-ci/admin/spending", admin)
    assert status == 200, everyone
    users = {u["user"]: u for u in everyone["users"]}
    assert {ALICE, BOB} <= set(users)
    assert users[ALICE]["this_month"][0]["model"] == "openai:gpt-5-mini"
    assert users[ALICE]["limits"][0]["name"] == "tokens_per_day"


def test_the_admin_page_shows_user_text_as_text(team: Team) -> None:
    # A model id is the user's to choose where the policy allows a pattern (research:
    # openai:*): one that is markup must reach the admin's page as text. (Priced as the
    # model its id starts with, as the price table reads ids.)
    team.hub.api("POST", "groups/research", {"users": [ADMIN]})
    admin = team.hub.token_for(ADMIN, [SERVICE])
    team.fake.push(Turn("ok"))
    body = {"model": "openai:gpt-5-mini<img src=x onerror=alert(1)>", "messages": [
        {"role": "user", "content": "hi"}]}
    status, said = team.hub.request("POST", "services/jupyter-ci/turn", admin, body)
    assert status == 200, said  # the turn is recorded under that model's name
    status, page = team.hub.request("GET", "services/jupyter-ci/admin", admin)
    assert status == 200 and ALICE in page and BOB in page
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_token_with_the_scope_drives_a_session_one_without_is_refused(team: Team) -> None:
    scoped = team.hub.token_for(BOB, [f"access:servers!user={BOB}"])
    sid = new_session(team.hub, BOB, scoped)["id"]
    status, run = team.hub.request("POST", f"user/{BOB}/jupyter-ci/sessions/{sid}/execute",
                                   scoped, {"code": "6 * 7"})
    assert status == 200 and run["outputs"][0]["data"]["text/plain"] == "42", run
    unscoped = team.hub.token_for(BOB, [f"read:users:name!user={BOB}"])
    status, _ = team.hub.request("POST", f"user/{BOB}/jupyter-ci/sessions", unscoped, {})
    assert status == 403
    status, _ = team.hub.request("POST", f"user/{BOB}/jupyter-ci/sessions/{sid}/execute",
                                 unscoped, {"code": "1"})
    assert status == 403


def test_the_python_client_and_the_mcp_door_take_a_hub_token(team: Team) -> None:
    from jupyter_ci.client import Client

    token = server_token(team, BOB)
    # docs/hub.md's example, against this Hub.
    with Client(f"{team.hub.url}user/{BOB}/", token=token) as jc, jc.session() as py:
        assert py.execute("6 * 7").results[0].text == "42"
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "hub-test", "version": "0"}}}
    request = urllib.request.Request(
        f"{team.hub.url}user/{BOB}/jupyter-ci/mcp", data=json.dumps(hello).encode(),
        method="POST", headers={"Authorization": f"token {token}",
                                "Content-Type": "application/json",
                                "Accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(request, timeout=60) as response:
        said = response.read().decode()
    assert '"serverInfo"' in said, said
    unscoped = team.hub.token_for(BOB, [f"read:users:name!user={BOB}"])
    request.headers["Authorization"] = f"token {unscoped}"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 403


def test_the_hubs_culler_sees_a_running_ask_as_activity(team: Team) -> None:
    token = server_token(team, BOB)
    sid = new_session(team.hub, BOB, token)["id"]
    team.fake.push(Turn("Thought for a while.", first_delay=15.0))
    asked = threading.Thread(target=rest_ask, args=(team.hub, BOB, token, sid),
                             kwargs={"prompt": "think"})
    asked.start()
    try:
        time.sleep(2)  # the ask's request and its session's start are behind us
        first, later = last_activity(team, BOB), ""
        # No request reaches the server now and its kernel says nothing: only the model
        # call of the ask runs, and the Hub hears of it as activity while it does.
        while asked.is_alive() and later <= first:
            time.sleep(0.5)
            later = last_activity(team, BOB)
        assert later > first and asked.is_alive()
    finally:
        asked.join(60)


def last_activity(team: Team, user: str) -> str:
    """Return the last activity the Hub knows of `user`'s server (ISO 8601, UTC)."""
    return str(team.hub.api("GET", f"users/{user}")["servers"][""]["last_activity"])
