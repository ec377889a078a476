"""The Hub service's routes besides the turn: a user's policy and spending, the admins' view.

GET only. Each caller is a Hub user with the service's access scope, by token (a user's
server, a script) or by the service's OAuth cookie (a browser); nobody reads anyone else's
spending except the Hub's admins, on admin/spending and the admin page, a page of users at a
time (`?limit=`, `?cursor=`: spending.read_page), so neither the database's reads nor the
Hub's user lookups grow with the number of users.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from jupyterhub.services.auth import HubOAuthenticated
from tornado import web

from jupyter_ci.hub.auth import HubGate, Member
from jupyter_ci.hub.meter import HubMeter
from jupyter_ci.hub.page import CSP, admin_page
from jupyter_ci.hub.spending import PageError, make_cursor, read_page, user_spending
from jupyter_ci.server.broker.errors import BrokerError
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.hub import ADMIN_PATH, ADMIN_SPENDING_PATH, AllSpending, Price, UserPolicy


class _HubRoute(HubOAuthenticated, web.RequestHandler):  # type: ignore[misc]  # untyped mixin
    """A GET route for Hub users; refusals are JSON {"message": ...}."""

    def initialize(self, gate: HubGate, providers: tuple[str, ...],
                   prices: dict[str, Price]) -> None:
        """Keep the gate (the Hub's auth, its users), what the service serves, its prices."""
        self.gate = gate
        self.hub_auth = gate.auth
        self.meter: HubMeter = gate.meter
        self.providers = providers
        self.prices = prices

    async def member(self) -> Member | None:
        """Return the caller, entered in the meter, or answer why not (None)."""
        try:
            model = await self.hub_auth.get_user(self, sync=False)
            if not model and self.login_redirect():
                return None
            member = await self.gate.check(model)
        except BrokerError as err:
            self.refuse(err.status, err.message)
            return None
        await self.meter.enter(member.name, member.groups, time.monotonic())
        return member

    def login_redirect(self) -> bool:
        """Send a browser without a session to the Hub's login; False for an API call."""
        return False

    def refuse(self, status: int, message: str) -> None:
        """Finish with an error the caller can show."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message}))

    def reply(self, value: object) -> None:
        """Finish with a wire value as JSON."""
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(encode(value)))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Answer tornado's own errors in JSON, without details."""
        self.refuse(status_code, f"The jupyter-ci Hub service cannot handle this request "
                                 f"(HTTP {status_code} {self._reason}).")

    def page(self) -> tuple[int, str] | None:
        """Return the page of users asked for (size, after whom), or answer 400 (None)."""
        try:
            return read_page(self.get_query_argument("limit", None),
                             self.get_query_argument("cursor", None))
        except PageError as err:
            self.refuse(400, str(err))
            return None

    async def everyone(self, limit: int, after: str) -> AllSpending:
        """Return this month's spending of up to `limit` users after `after`, by name."""
        now = self.meter.clock()
        first = now.date().replace(day=1)
        names = await self.meter.db(self.meter.store.users_since, first, after, limit + 1)
        more, names = len(names) > limit, names[:limit]
        rows = await self.meter.db(self.meter.store.since, first, None, names) if names else []
        members = await asyncio.gather(*(self.gate.directory.member(n) for n in names))
        for member in members:
            await self.meter.enter(member.name, member.groups, time.monotonic())
        return AllSpending(day=now.date().isoformat(), month=now.strftime("%Y-%m"), users=tuple(
            user_spending(n, now.date(), rows, self.meter.limits(n)) for n in names),
            more=more, next=make_cursor(names[-1]) if more else "")


class PolicyHandler(_HubRoute):
    """GET policy: the caller's rules, as their server applies them."""

    async def get(self) -> None:
        """Answer the caller's UserPolicy."""
        member = await self.member()
        if member is None:
            return
        rule = self.meter.book(member.name).rules.rule
        self.reply(UserPolicy(
            user=member.name, models=("*",) if rule.models is None else rule.models,
            model=rule.model or "", providers=self.providers,
            approval_minimum=rule.approval_minimum or "never", boxed=bool(rule.boxed),
            prices=self.prices, limits=self.meter.limits(member.name)))


class SpendingHandler(_HubRoute):
    """GET spending: the caller's own, today and this month."""

    async def get(self) -> None:
        """Answer the caller's UserSpending."""
        member = await self.member()
        if member is None:
            return
        now = self.meter.clock()
        rows = await self.meter.db(self.meter.store.since, now.date().replace(day=1),
                                   member.name)
        self.reply(user_spending(member.name, now.date(), rows,
                                 self.meter.limits(member.name)))


class AdminSpendingHandler(_HubRoute):
    """GET admin/spending: every user's (the Hub's admins only)."""

    async def get(self) -> None:
        """Answer a page of AllSpending to an admin, else 403 (400: a bad limit or cursor)."""
        if await self.admin() is not None and (page := self.page()) is not None:
            self.reply(await self.everyone(*page))

    async def admin(self) -> Member | None:
        """Return the caller if they are one of the Hub's admins, else refuse."""
        member = await self.member()
        if member is not None and not member.admin:
            self.refuse(403, f"{member.name!r} is not an admin of this JupyterHub: only admins "
                             "see everyone's jupyter-ci spending.")
            return None
        return member


class AdminPageHandler(AdminSpendingHandler):
    """GET admin: the spending page (browsers log in through the Hub)."""

    def login_redirect(self) -> bool:
        """Send the browser to the Hub's login, back here after."""
        self.redirect(self.get_login_url())
        return True

    async def get(self) -> None:
        """Render the page to an admin."""
        if await self.admin() is None or (page := self.page()) is None:
            return
        spending = await self.everyone(*page)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")
        # Relative to .../admin: .../admin/spending, and .../admin for the other pages.
        self.finish(admin_page(spending, ADMIN_SPENDING_PATH, ADMIN_PATH, page[0],
                               self.get_query_argument("cursor", None)))
