"""The Hub service's meter: each user's models and budgets, charged and recorded.

The model service (server/broker/model_service.py) asks it before and after every turn, as
a single server asks its own budgets. A user's counts for this month live in memory (read
from the database the first time the user is seen, `enter`), so judging a turn costs no
query; each settled turn is added to them at once, and the turns of each half second are
written to the database together by one worker thread, in order. Reservations make turns
running at once see each other: together they pass a limit by one reservation at most, as on
a single server. A refused turn (a model not allowed, a budget used up, nothing spent) adds
one to the user's day's REFUSED row (store.py), whatever model it named.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from logging import Logger
from typing import TypeVar

from jupyter_ci.agent.cost import Rates, dollars
from jupyter_ci.agent.errors import LimitReached, ModelConfigError
from jupyter_ci.agent.types import ModelReply
from jupyter_ci.hub.policy import BUDGETS, Policy, Rules
from jupyter_ci.hub.store import MODEL_CHARS, REFUSED, Row, Store
from jupyter_ci.server.broker.budget import Reservation
from jupyter_ci.server.broker.meter import unpriced_hint
from jupyter_ci.wire.hub import Limit, LimitName

T = TypeVar("T")
#: Seconds settled turns wait to be written together: off the turn's own path (a write on
#: the database thread while a turn streams slowed it), at most this much lost in a crash.
FLUSH_S = 0.5


def utc_now() -> datetime:
    """Return the time now, in UTC."""
    return datetime.now(UTC)


@dataclass
class Counts:
    """Tokens (input plus output) and USD."""

    tokens: int = 0
    usd: float = 0.0

    def add(self, tokens: int, usd: float) -> None:
        """Add to both."""
        self.tokens += tokens
        self.usd += usd


@dataclass
class Book:
    """One user's counts this month, by day, and what turns running now reserved."""

    month: str
    rules: Rules
    days: dict[date, Counts] = field(default_factory=dict)
    reserved: Counts = field(default_factory=Counts)
    #: When the rules were last read (time.monotonic).
    read_at: float = 0.0

    def used(self, name: LimitName, today: date) -> float:
        """Return what a budget's window holds so far, reservations included."""
        if name.endswith("_day"):
            counts = [self.days.get(today, Counts()), self.reserved]
        else:
            counts = [*self.days.values(), self.reserved]
        return float(sum(c.tokens for c in counts)) if name.startswith("tokens") else sum(
            c.usd for c in counts)


@dataclass
class HubMeter:
    """Judges every user's turns by the policy; keeps and records what they spend."""

    policy: Policy
    store: Store
    log: Logger | None = None
    clock: Callable[[], datetime] = utc_now
    #: The providers the service holds a key (or a keyless URL) for; None: not checked here.
    served: frozenset[str] | None = None
    books: dict[str, Book] = field(default_factory=dict)
    _rules: dict[tuple[str, tuple[str, ...]], Rules] = field(default_factory=dict)
    #: The one thread that talks to the database, so writes land in order.
    _db: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="jupyter-ci-db"))
    #: Turns settled and not yet written, summed per user, model and day.
    _pending: dict[tuple[str, str, date], Row] = field(default_factory=dict)
    _flushing: asyncio.TimerHandle | None = None

    async def enter(self, user: str, groups: list[str], now: float) -> Book:
        """Know `user` (a member of `groups`): their rules, and this month's counts."""
        key = (user, tuple(groups))
        rules = self._rules.get(key)
        if rules is None:  # read once per user and set of groups
            rules = self._rules[key] = self.policy.rules_for(user, groups)
        month = self.clock().strftime("%Y-%m")
        book = self.books.get(user)
        if book is None or book.month != month:
            first = self.clock().date().replace(day=1)
            rows = await self.db(self.store.since, first, user)
            book = Book(month, rules, reserved=book.reserved if book else Counts())
            for row in rows:
                book.days.setdefault(row.day, Counts()).add(row.tokens, row.cost_usd)
            self.books[user] = book
        book.rules, book.read_at = rules, now
        return book

    async def db(self, call: Callable[..., T], *args: object) -> T:
        """Run a blocking database call on the database thread, after the pending writes."""
        self.flush()
        return await asyncio.get_running_loop().run_in_executor(self._db, call, *args)

    def book(self, user: str) -> Book:
        """Return the book `enter` opened for `user` (the turn's gate entered them)."""
        return self.books[user]

    def admit(self, holder: str | None, model_id: str, rates: Rates | None) -> None:
        """Refuse a model the user's rules do not allow, or one without a price while
        the user has a money budget; count a refusal."""
        if holder is None:
            return  # no caller yet: the turn's admission names one
        try:
            self._admit(holder, model_id, rates)
        except ModelConfigError:
            self.refused(holder)
            raise

    def _admit(self, holder: str, model_id: str, rates: Rates | None) -> None:
        """Raise ModelConfigError if the user's rules refuse the model."""
        rules = self.book(holder).rules
        if len(model_id) > MODEL_CHARS:
            raise ModelConfigError(f"The model id is longer than {MODEL_CHARS} characters.",
                                   "Pick a model the Hub's policy allows.")
        provider = model_id.partition(":")[0]
        if self.served is not None and provider not in self.served:
            raise ModelConfigError(
                f"The JupyterHub's jupyter-ci service holds no key for {provider}.",
                f"Pick a model of {', '.join(sorted(self.served)) or 'no provider yet'}, or "
                "ask your JupyterHub admin to add the key.")
        if not rules.allows(model_id):
            allowed = ", ".join(rules.rule.models or ()) or "none"
            raise ModelConfigError(
                f"The JupyterHub's jupyter-ci policy does not let {holder} use {model_id} "
                f"(models, set for {rules.source('models')}: {allowed}).",
                "Pick one of those models, or ask your JupyterHub admin.")
        money = [name for name in BUDGETS if name.startswith("usd") and rules.budget(name)]
        if rates is None and money:
            raise ModelConfigError(
                f"{model_id} has no price, and the JupyterHub's jupyter-ci policy limits what "
                f"{holder} may spend ({money[0]}): its calls could not be counted, so none is "
                "made.", unpriced_hint(model_id, "configure(c, prices=...) in the Hub's config"))

    def reserve(self, holder: str, model_id: str, tokens: int, usd: float) -> Reservation:
        """Reserve a turn's bound, or raise LimitReached naming the budget and its reset."""
        book, now = self.book(holder), self.clock()
        for name in BUDGETS:
            limit = book.rules.budget(name)
            used = book.used(name, now.date())
            if limit and used >= limit:
                self.refused(holder)
                raise LimitReached(self._full(holder, book.rules, name, used, limit, now),
                                   "Wait until it resets, or ask your JupyterHub admin to "
                                   "raise it.")
        book.reserved.add(tokens, usd)
        return Reservation(holder, tokens, usd, model_id)

    def settle(self, reservation: Reservation, spent: ModelReply | None, usd: float) -> None:
        """Charge a turn (None: its reservation) to today, and write it to the database."""
        book = self.books.get(reservation.holder)
        if book is not None:
            book.reserved.add(-reservation.tokens, -reservation.usd)
        if spent is None:
            spent, usd = ModelReply(input_tokens=reservation.tokens), reservation.usd
        if not (spent.input_tokens or spent.output_tokens or spent.cached_tokens or usd):
            # Refused by the provider (a model id it does not have, a request it rejects):
            # nothing spent, and the model id is the caller's text, so not a row of its own.
            self.refused(reservation.holder)
            return
        today = self.clock().date()
        row = Row(reservation.holder, reservation.model, today, 1, spent.input_tokens,
                  spent.output_tokens, spent.cached_tokens, usd)
        if book is not None:
            book.days.setdefault(today, Counts()).add(row.tokens, usd)
        self._queue(row)

    def refused(self, holder: str) -> None:
        """Count a refused turn of `holder` in their day's one REFUSED row."""
        self._queue(Row(holder, REFUSED, self.clock().date(), 0, 0, 0, 0, 0.0, refusals=1))

    def _queue(self, row: Row) -> None:
        """Add a row to the next write (summed with the pending one of its key)."""
        key = (row.user, row.model, row.day)
        found = self._pending.get(key)
        self._pending[key] = row if found is None else found.plus(row)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a script's meter): written now
            self.flush()
            return
        if self._flushing is None:
            self._flushing = loop.call_later(FLUSH_S, self.flush)

    def flush(self) -> None:
        """Write the turns settled since the last write, in one transaction on the thread."""
        self._flushing = None
        rows, self._pending = list(self._pending.values()), {}
        if rows:
            self._db.submit(self.store.add, *rows).add_done_callback(self._written)

    def _written(self, future: object) -> None:
        """Log a write that failed (the counts in memory still hold it)."""
        error = getattr(future, "exception", lambda: None)()
        if error is not None and self.log is not None:
            self.log.error("jupyter-ci: could not record spending (%s: %s)",
                           type(error).__name__, error)

    def open(self, holder: str) -> None:
        """Users need no opening: the gate enters them."""

    def close(self, holder: str) -> None:
        """Users are never closed: their spending lasts."""

    def limits(self, user: str) -> tuple[Limit, ...]:
        """Return the user's budgets, what each holds and when it resets."""
        book, now = self.book(user), self.clock()
        return tuple(
            Limit(name, book.rules.budget(name), book.used(name, now.date()),
                  resets_at(name, now).isoformat(), book.rules.source(name))
            for name in BUDGETS if book.rules.budget(name))

    def stop(self) -> None:
        """Finish the pending writes and close the database."""
        self.flush()
        self._db.shutdown(wait=True)
        self.store.close()

    @staticmethod
    def _full(user: str, rules: Rules, name: LimitName, used: float, limit: float,
              now: datetime) -> str:
        """Say which budget is used up, by whom, and when it starts again."""
        reset = resets_at(name, now)
        unit = "model tokens" if name.startswith("tokens") else "USD"
        shown = (f"{math.ceil(used):,} of {limit:,.0f}" if name.startswith("tokens")
                 else f"{dollars(used)} of {dollars(limit)}")
        window = "today" if name.endswith("_day") else "this month"
        return (f"{user} has used {shown} {unit} {window}, the budget {name} that the "
                f"JupyterHub's jupyter-ci policy sets for {rules.source(name)}. It resets "
                f"at {reset:%Y-%m-%d %H:%M} UTC, in {_until(reset - now)}.")


def resets_at(name: LimitName, now: datetime) -> datetime:
    """Return when a budget's window ends: the next UTC midnight, or next month's first."""
    midnight = datetime.combine(now.date(), datetime.min.time(), UTC)
    if name.endswith("_day"):
        return midnight + timedelta(days=1)
    first = midnight.replace(day=1)
    return (first + timedelta(days=32)).replace(day=1)


def _until(delta: timedelta) -> str:
    """Say a time span in days, hours and minutes."""
    minutes = max(1, math.ceil(delta.total_seconds() / 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d" if days else "", f"{hours} h" if hours else "",
             f"{minutes} min" if minutes else ""]
    return " ".join(p for p in parts if p)

