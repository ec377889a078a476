"""The Hub's policy as the admin writes it, and what configure() puts in the Hub's config.

No Hub runs here: the policy's reading and merging, the meter's budgets and their reset
times on a fixed clock, the spending database across two openings, and the config
configure() writes, read back by JupyterHub's own classes.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from traitlets.config import Config

from jupyter_ci.agent.errors import LimitReached, ModelConfigError
from jupyter_ci.agent.types import ModelReply
from jupyter_ci.hub import configure
from jupyter_ci.hub.meter import HubMeter, resets_at
from jupyter_ci.hub.policy import PolicyError, read_policy
from jupyter_ci.hub.settings import ENV_POLICY, HubSettings, SettingsError
from jupyter_ci.hub.store import Row, Store
from jupyter_ci.wire.hub import ENV_HUB_URL

POLICY = {
    "default": {"models": ["openai:gpt-5-mini"], "tokens_per_day": 1000, "usd_per_month": 5,
                "approval_minimum": "first"},
    "groups": {"research": {"models": ["openai:*"], "usd_per_month": 50, "boxed": True},
               "big": {"usd_per_month": 0, "tokens_per_day": 500, "approval_minimum": "never",
                       "boxed": False},
               "strict": {"approval_minimum": "each", "boxed": True}},
    "users": {"carol": {"tokens_per_day": 10}},
}


def test_a_user_gets_the_default_then_the_most_generous_group_then_their_own() -> None:
    policy = read_policy(POLICY)
    plain = policy.rules_for("dan", [])
    assert plain.rule.models == ("openai:gpt-5-mini",) and plain.budget("usd_per_month") == 5
    assert not plain.allows("openai:gpt-5") and plain.allows("OpenAI:GPT-5-mini")
    both = policy.rules_for("erin", ["research", "big", "strict", "unknown"])
    assert both.allows("openai:gpt-5") and not both.allows("anthropic:claude-haiku-4-5")
    assert both.budget("usd_per_month") == 0  # one group says unlimited: unlimited
    assert both.budget("tokens_per_day") == 500  # the largest a group sets
    assert both.rule.approval_minimum == "never" and both.rule.boxed is False
    assert both.source("usd_per_month") == "group research, big"
    carol = policy.rules_for("carol", ["research"])
    assert carol.budget("tokens_per_day") == 10 and carol.source("tokens_per_day") == "user carol"
    assert read_policy({"users": {"x": {"models": []}}}).rules_for("x", []).allows("a:b") is False


@pytest.mark.parametrize(("policy", "said"), [
    ({"defaults": {}}, "no section 'defaults'"),
    ({"default": {"usd_per_moth": 1}}, "default has no rule 'usd_per_moth'"),
    ({"groups": {"g": {"tokens_per_day": 1.5}}}, "groups['g'].tokens_per_day must be a whole"),
    ({"users": {"u": {"approval_minimum": "always"}}}, "must be one of never, first"),
    ({"default": {"models": "openai:gpt-5"}}, "must be a list of model ids"),
    ({"default": {"usd_per_day": -1}}, "must be a number, 0 or more"),
    ({"default": {"boxed": "yes"}}, "must be True or False"),
])
def test_a_policy_mistake_is_refused_naming_where_it_is(policy: object, said: str) -> None:
    with pytest.raises(PolicyError) as raised:
        read_policy(policy)
    assert said in str(raised.value)


def meter(tmp_path: Path, now: datetime) -> HubMeter:
    """A meter of POLICY over a database in `tmp_path`, its clock stopped at `now`."""
    return HubMeter(read_policy(POLICY), Store.open(f"sqlite:///{tmp_path}/s.sqlite"),
                    clock=lambda: now)


def test_a_budget_refuses_once_used_and_says_when_it_resets(tmp_path: Path) -> None:
    now = datetime(2026, 11, 30, 21, 15, tzinfo=UTC)
    hub = meter(tmp_path, now)
    asyncio.run(hub.enter("carol", [], 0.0))
    first = hub.reserve("carol", "openai:gpt-5-mini", 4000, 0.001)
    hub.settle(first, ModelReply(input_tokens=8, output_tokens=4), 0.001)
    with pytest.raises(LimitReached) as raised:
        hub.reserve("carol", "openai:gpt-5-mini", 4000, 0.001)
    assert raised.value.message == (
        "carol has used 12 of 10 model tokens today, the budget tokens_per_day that the "
        "JupyterHub's jupyter-ci policy sets for user carol. It resets at 2026-12-01 00:00 "
        "UTC, in 2 h 45 min.")
    assert resets_at("usd_per_month", now) == datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(ModelConfigError, match="does not let carol use openai:gpt-5 "):
        hub.admit("carol", "openai:gpt-5", None)
    with pytest.raises(ModelConfigError, match="has no price"):
        hub.admit("carol", "openai:gpt-5-mini", None)
    hub.stop()


def test_spending_is_read_back_from_the_database_by_a_new_meter(tmp_path: Path) -> None:
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    hub = meter(tmp_path, now)
    asyncio.run(hub.enter("dan", [], 0.0))
    for _ in range(3):
        turn = hub.reserve("dan", "openai:gpt-5-mini", 100, 0.01)
        hub.settle(turn, ModelReply(input_tokens=300, output_tokens=40, cached_tokens=100), 0.5)
    hub.stop()  # its writes finish
    again = meter(tmp_path, now)
    asyncio.run(again.enter("dan", [], 0.0))
    used = {limit.name: limit.used for limit in again.limits("dan")}
    assert used == {"tokens_per_day": 1020, "usd_per_month": 1.5}
    [row] = again.store.since(date(2026, 11, 1))
    assert row == Row("dan", "openai:gpt-5-mini", date(2026, 11, 30), 3, 900, 120, 300, 1.5)
    # Next month starts from nothing; last month stays in the table.
    later = meter(tmp_path, datetime(2026, 12, 1, 0, 5, tzinfo=UTC))
    asyncio.run(later.enter("dan", [], 0.0))
    assert {limit.name: limit.used for limit in later.limits("dan")}["usd_per_month"] == 0
    for opened in (again, later):
        opened.stop()


def test_configure_sets_the_service_its_role_and_the_users_scopes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyterhub.app import JupyterHub
    from jupyterhub.spawner import LocalProcessSpawner

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-in-the-hubs-env")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    c = Config()
    c.Spawner.environment = {"MINE": "1"}
    service = configure(c, policy=POLICY, url="http://127.0.0.1:9999")
    hub, spawner = JupyterHub(config=c), LocalProcessSpawner(config=c)
    assert hub.services == [service] and service["command"][1:] == ["-m", "jupyter_ci.hub"]
    assert service["environment"]["OPENAI_API_KEY"] == "sk-test-in-the-hubs-env"
    assert json.loads(service["environment"][ENV_POLICY]) == POLICY
    assert hub.extra_user_scopes == {"access:services!service=jupyter-ci"}
    assert hub.load_roles[0]["services"] == ["jupyter-ci"]
    assert spawner.server_token_scopes == [
        "users:activity!user", "access:servers!server", "access:services!service=jupyter-ci"]
    assert spawner.environment == {
        "MINE": "1", ENV_HUB_URL: "http://127.0.0.1:9999/services/jupyter-ci/"}
    # The users' servers get the service's URL, never a key.
    assert "sk-test" not in json.dumps(spawner.environment)
    settings = HubSettings.from_environ({**service["environment"],
                                         "JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:9999"})
    assert settings.policy == read_policy(POLICY)


def test_configure_refuses_a_mistake_before_the_hub_starts() -> None:
    with pytest.raises(SettingsError, match="default has no rule 'budget'"):
        configure(Config(), policy={"default": {"budget": 5}})
    with pytest.raises(SettingsError, match=r"c\.JupyterCI\.prices"):
        configure(Config(), prices={"openai:x": {"input": "cheap"}})
    with pytest.raises(ValueError, match="NOT_SET_ANYWHERE is not set"):
        configure(Config(), keys=["NOT_SET_ANYWHERE"])


@pytest.mark.parametrize(("version", "advisory", "target"), [
    ("5.0.0", "CVE-2026-33709", "5.5.3"),
    ("5.4.4", "CVE-2026-40864", "5.5.3"),
    ("5.5.2", "GHSA-hx46-2cv3-mh6g", "5.5.3"),
    ("6.0.1", "GHSA-hx46-2cv3-mh6g", "6.1.0"),
])
def test_configure_refuses_a_jupyterhub_with_a_known_advisory(
        monkeypatch: pytest.MonkeyPatch, version: str, advisory: str, target: str) -> None:
    from jupyter_ci.hub import deploy

    monkeypatch.setattr(deploy, "hub_version", lambda: version)
    c = Config()
    with pytest.raises(deploy.VulnerableHub) as raised:
        configure(c, policy=POLICY)
    said = str(raised.value)
    assert f"JupyterHub {version} is affected by {advisory}" in said
    assert f"upgrade JupyterHub to {target} or later" in said
    assert "services" not in c.JupyterHub  # nothing was added to the config


@pytest.mark.parametrize("version", ["5.5.3", "5.5.4", "6.1.0", "6.2.0.dev0"])
def test_configure_takes_a_fixed_jupyterhub(monkeypatch: pytest.MonkeyPatch,
                                            version: str) -> None:
    from jupyter_ci.hub import deploy

    monkeypatch.setattr(deploy, "hub_version", lambda: version)
    assert configure(Config(), policy=POLICY)["name"] == "jupyter-ci"


def test_the_installed_jupyterhub_passes_and_is_the_one_read() -> None:
    import jupyterhub

    from jupyter_ci.hub import deploy

    assert deploy.hub_version() == jupyterhub.__version__
    deploy.refuse_vulnerable_hub(deploy.hub_version())
