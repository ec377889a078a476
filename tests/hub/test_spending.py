"""The Hub service's spending without a Hub: refused turns, the admins' pages, the file's modes.

Turns go through the model service the service runs (ModelService with the Hub's meter, the
fake provider behind the real SDK); the admin routes are the service's own handlers on a
tornado server of the test, with the Hub's auth replaced by a stand-in that names the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPResponse
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.types import Message, ModelRequest
from jupyter_ci.hub.auth import HubGate, Member
from jupyter_ci.hub.handlers import AdminPageHandler, AdminSpendingHandler
from jupyter_ci.hub.meter import HubMeter
from jupyter_ci.hub.page import CSP
from jupyter_ci.hub.policy import read_policy
from jupyter_ci.hub.spending import make_cursor
from jupyter_ci.hub.store import REFUSED, Row, Store
from jupyter_ci.models.turn_wire import Turn
from jupyter_ci.server.broker.broker import Broker
from jupyter_ci.server.broker.model_service import ModelService
from jupyter_ci.wire.hub import ADMIN_PAGE_MAX
from tests.fakellm import FakeLLM
from tests.fakellm_wire import Fail
from tests.fakellm_wire import Turn as Answer

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
POLICY = {"default": {"models": ["openai:gpt-5-mini"]},
          "groups": {"research": {"models": ["openai:*"]}},
          "users": {"carol": {"tokens_per_day": 10}}}
REQUEST = ModelRequest(system="", messages=(Message("user", "hi"),), tools=(), max_tokens=64)


def hub_meter(tmp_path: Path) -> HubMeter:
    """A meter of POLICY over a database in `tmp_path`, its clock stopped at NOW."""
    return HubMeter(read_policy(POLICY), Store.open(f"sqlite:///{tmp_path}/s.sqlite"),
                    clock=lambda: NOW)


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    """The fake provider."""
    with FakeLLM() as llm:
        yield llm


async def turns(service: ModelService, user: str, models: list[str]) -> int:
    """Send one turn per model id as `user`; return how many were refused."""
    refused = 0
    for model in models:
        try:
            await service.turn(user, Turn(model, REQUEST), lambda line: None)
        except AskError:
            refused += 1
    return refused


def test_a_thousand_refused_turns_grow_a_counter_not_the_table(
        tmp_path: Path, fake: FakeLLM) -> None:
    meter = hub_meter(tmp_path)
    broker = Broker.take_from_environ({"OPENAI_API_KEY": "sk-test",
                                       "OPENAI_BASE_URL": fake.openai_base_url})
    service = ModelService(broker, 10.0, 0, 64, custom_meter=meter)

    async def hammer() -> int:
        for user, groups in (("dan", []), ("carol", ["research"]), ("erin", ["research"])):
            await meter.enter(user, groups, time.monotonic())
        fake.push(Answer("carol's one answer"))  # 18 tokens: her day's 10 are used up
        assert await turns(service, "carol", ["openai:gpt-5-mini"]) == 0
        # Each refused turn names a model of its own, as a client may: not allowed (dan),
        # past the budget (carol), or refused by the provider before spending (erin).
        refused = await turns(service, "dan", [f"openai:not-allowed-{i}" for i in range(400)])
        refused += await turns(service, "carol", [f"openai:any-{i}" for i in range(300)])
        fake.push(Fail(404, times=300, message="The model does not exist."))
        refused += await turns(service, "erin", [f"openai:no-such-{i}" for i in range(300)])
        return refused

    assert asyncio.run(hammer()) == 1000
    meter.stop()  # its writes finish
    rows = Store.open(f"sqlite:///{tmp_path}/s.sqlite").since(date(2026, 11, 1))
    assert len(rows) == 4  # carol's one model, and one REFUSED row per user
    assert {r.user: r.refusals for r in rows if r.model == REFUSED} == {
        "dan": 400, "carol": 300, "erin": 300}
    [spent] = [r for r in rows if r.model != REFUSED]
    assert (spent.user, spent.model, spent.turns, spent.refusals) == (
        "carol", "openai:gpt-5-mini", 1, 0)


def test_a_table_of_an_earlier_version_gains_the_refusals_column(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/old.sqlite"
    with sa.create_engine(url).begin() as conn:
        conn.execute(sa.text(
            "CREATE TABLE jupyter_ci_spending (user VARCHAR(255), model VARCHAR(255), day DATE,"
            " turns INTEGER NOT NULL, input_tokens BIGINT NOT NULL, output_tokens BIGINT NOT "
            "NULL, cached_tokens BIGINT NOT NULL, cost_usd FLOAT NOT NULL, "
            "PRIMARY KEY (user, model, day))"))
        conn.execute(sa.text("INSERT INTO jupyter_ci_spending VALUES "
                             "('dan', 'openai:gpt-5-mini', '2026-11-30', 2, 10, 5, 0, 0.5)"))
    store = Store.open(url)
    store.add(Row("dan", REFUSED, date(2026, 11, 30), 0, 0, 0, 0, 0.0, refusals=3))
    assert store.since(date(2026, 11, 1)) == [
        Row("dan", REFUSED, date(2026, 11, 30), 0, 0, 0, 0, 0.0, 3),
        Row("dan", "openai:gpt-5-mini", date(2026, 11, 30), 2, 10, 5, 0, 0.5, 0)]
    store.close()


class StandIn:
    """The Hub's auth as the admin handlers use it: every caller is `caller`."""

    def __init__(self, caller: Member) -> None:
        self.caller = caller
        self.access_scopes: set[str] = set()

    async def get_user(self, handler: object, sync: bool = False) -> dict[str, Any]:
        """Return the caller's Hub model."""
        return {"name": self.caller.name, "kind": "user"}

    async def member(self, name: str) -> Member:
        """Return a user's groups and admin flag (the Hub's directory)."""
        return self.caller if name == self.caller.name else Member(name, [], False)


@contextlib.asynccontextmanager
async def admin_routes(tmp_path: Path) -> AsyncIterator[str]:
    """Serve the admin routes over a meter with 12 users' spending; yield their base URL."""
    meter = hub_meter(Path(tempfile.mkdtemp(dir=tmp_path)))  # a database of its own
    meter.store.add(*(Row(f"user{n:02d}<b>", "openai:gpt-5-mini", NOW.date(), 1, 10, 5, 0,
                          0.01) for n in range(12)))
    meter.store.add(Row("user03<b>", REFUSED, NOW.date(), 0, 0, 0, 0, 0.0, refusals=7))
    stand_in = StandIn(Member("root", [], True))
    gate = HubGate(stand_in, stand_in, meter)  # type: ignore[arg-type]
    reads = {"gate": gate, "providers": ("openai",), "prices": {}}
    app = web.Application([("/admin/spending", AdminSpendingHandler, reads),
                           ("/admin", AdminPageHandler, reads)])
    [sock] = bind_sockets(0, "127.0.0.1")
    server = HTTPServer(app)
    server.add_sockets([sock])
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        server.stop()
        meter.stop()


def fetch_all(tmp_path: Path, paths: list[str]) -> list[tuple[int, str]]:
    """GET each path of the admin routes; return their statuses and bodies."""
    async def run() -> list[tuple[int, str]]:
        async with admin_routes(tmp_path) as url:
            client = AsyncHTTPClient()
            replies = [await client.fetch(url + path, raise_error=False) for path in paths]
            return [(r.code, r.body.decode()) for r in replies]

    return asyncio.run(run())


def pages_of(tmp_path: Path, limit: int) -> list[dict[str, Any]]:
    """Follow admin/spending's cursors from the first page; return every page."""
    async def run() -> list[dict[str, Any]]:
        async with admin_routes(tmp_path) as url:
            pages: list[dict[str, Any]] = []
            while not pages or pages[-1]["more"]:
                cursor = f"&cursor={pages[-1]['next']}" if pages else ""
                reply = await AsyncHTTPClient().fetch(
                    f"{url}admin/spending?limit={limit}{cursor}")
                pages.append(json.loads(reply.body))
            return pages

    return asyncio.run(run())


def test_admin_spending_comes_a_page_at_a_time(tmp_path: Path) -> None:
    pages = pages_of(tmp_path, 5)
    assert [len(p["users"]) for p in pages] == [5, 5, 2]
    assert [u["user"] for p in pages for u in p["users"]] == [
        f"user{n:02d}<b>" for n in range(12)]
    assert "next" not in pages[-1] and pages[0]["next"] == make_cursor("user04<b>")
    [everyone] = pages_of(tmp_path, 100)
    assert everyone["more"] is False  # one page holds all twelve
    refused = {u["user"]: u.get("refused_this_month", 0) for u in everyone["users"]}
    assert refused["user03<b>"] == 7 and refused["user04<b>"] == 0


@pytest.mark.parametrize("query", [
    "limit=0", f"limit={ADMIN_PAGE_MAX + 1}", "limit=ten", "limit=-1", "limit=5.0", "limit=",
    "limit=%EF%BC%95",  # a full-width digit five: isdecimal, not ASCII
    "cursor=", "cursor=not*base64", "cursor=" + "A" * 1401, "cursor=_w",  # not UTF-8
    "cursor=" + quote(make_cursor("dan") + "="),  # padded: not the form the service gives
])
def test_a_malformed_limit_or_cursor_is_a_clear_400(tmp_path: Path, query: str) -> None:
    said = "limit must be a whole number" if "limit" in query else "cursor is not one"
    for status, body in fetch_all(tmp_path, [f"admin/spending?{query}", f"admin?{query}"]):
        assert status == 400, (query, body)
        assert json.loads(body)["message"].startswith(said), body


def test_the_admin_page_pages_escaped_under_its_csp(tmp_path: Path) -> None:
    later = make_cursor("user09<b>")
    (code, first), (_, last), (_, whole) = fetch_all(
        tmp_path, ["admin?limit=5", f"admin?limit=5&cursor={later}", "admin"])
    assert code == 200
    assert "user00&lt;b&gt;" in first and "user05" not in first and "<b>" not in first
    assert f"href='admin?limit=5&amp;cursor={make_cursor('user04<b>')}'" in first
    assert "First page" not in first
    assert "user10&lt;b&gt;" in last and "user09" not in last and "Next 5" not in last
    assert "href='admin?limit=5'" in last and "First page" in last
    assert f"href='admin/spending?limit=5&amp;cursor={later}'" in last
    assert "<td>7</td>" in whole  # user03's refused turns


def test_the_admin_page_keeps_its_csp(tmp_path: Path) -> None:
    async def run() -> HTTPResponse:
        async with admin_routes(tmp_path) as url:
            return await AsyncHTTPClient().fetch(f"{url}admin?limit=5")

    headers = asyncio.run(run()).headers
    assert headers["Content-Security-Policy"] == CSP and headers["X-Content-Type-Options"]


@pytest.mark.parametrize("folder", ["existing", "made/by/the/service"])
def test_the_database_is_the_owners_alone_under_umask_022(tmp_path: Path, folder: str) -> None:
    (tmp_path / "existing").mkdir()
    (tmp_path / "existing").chmod(0o755)
    where = tmp_path / folder / "jupyter_ci_hub.sqlite"
    modes: dict[str, int] = {}
    before = os.umask(0o022)
    try:
        store = Store.open(f"sqlite:///{where}")
        # A rollback journal that stays, then a write-ahead log and its index, as SQLite
        # makes them beside the database, each read while it exists.
        for mode in ("PERSIST", "WAL"):
            with store.engine.begin() as conn:
                conn.exec_driver_sql(f"PRAGMA journal_mode={mode}")
                conn.execute(sa.text("INSERT INTO jupyter_ci_spending VALUES "
                                     f"('{mode}', 'm:x', '2026-11-30', 1, 1, 1, 0, 0.0, 0)"))
            modes |= {p.name: stat.S_IMODE(p.stat().st_mode) for p in where.parent.iterdir()}
        store.close()
    finally:
        os.umask(before)
    sides = {where.name + side for side in ("", "-journal", "-wal", "-shm")}
    assert sides <= set(modes) and {modes[name] for name in sides} == {0o600}, modes
    if folder != "existing":  # each folder the service made is 0700
        for made in (tmp_path / "made", tmp_path / "made/by", where.parent):
            assert stat.S_IMODE(made.stat().st_mode) == 0o700, made
    assert stat.S_IMODE((tmp_path / "existing").stat().st_mode) == 0o755  # the admin's own


def test_a_database_an_earlier_version_left_readable_is_tightened(tmp_path: Path) -> None:
    where = tmp_path / "s.sqlite"
    Store.open(f"sqlite:///{where}").close()
    where.chmod(0o644)
    Path(f"{where}-journal").write_bytes(b"")
    Path(f"{where}-journal").chmod(0o644)
    Store.open(f"sqlite:///{where}").close()
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(f"{where}-journal").stat().st_mode) == 0o600


def test_memory_and_other_databases_are_left_alone(tmp_path: Path) -> None:
    Store.open("sqlite://").close()
    Store.open("sqlite:///:memory:").close()
    assert list(tmp_path.iterdir()) == []
