"""Spending as users and admins see it: the database's rows summed by user and model.

A user's REFUSED rows (store.py) are counted as their refused turns, not as a model.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from datetime import date

from jupyter_ci.hub.store import REFUSED, Row
from jupyter_ci.wire.hub import ADMIN_PAGE_LIMIT, ADMIN_PAGE_MAX, Limit, ModelSpending, UserSpending

#: What a cursor is made of (URL-safe base64 of a user's name, unpadded), and its most.
_CURSOR = re.compile(r"[A-Za-z0-9_-]{1,1400}")


class PageError(ValueError):
    """A page of admin/spending asked for with a limit or cursor that cannot be read."""


def read_page(limit: str | None, cursor: str | None) -> tuple[int, str]:
    """Return a page's size and the user it starts after, or raise PageError saying why."""
    size = ADMIN_PAGE_LIMIT
    if limit is not None:
        if not (limit.isascii() and limit.isdecimal()) or not 1 <= int(limit) <= ADMIN_PAGE_MAX:
            raise PageError(f"limit must be a whole number of users from 1 to {ADMIN_PAGE_MAX} "
                            f"(default {ADMIN_PAGE_LIMIT}).")
        size = int(limit)
    return size, read_cursor(cursor) if cursor is not None else ""


def read_cursor(cursor: str) -> str:
    """Return the user a cursor names, or raise PageError."""
    try:
        if not _CURSOR.fullmatch(cursor):
            raise ValueError(cursor)
        name = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        name = ""
    if not name or make_cursor(name) != cursor:
        raise PageError("cursor is not one this service gave: pass the `next` of the page "
                        "before, or none for the first page.")
    return name


def make_cursor(user: str) -> str:
    """Return the cursor of the page that starts after `user`."""
    return base64.urlsafe_b64encode(user.encode()).decode().rstrip("=")


def by_model(rows: Iterable[Row]) -> tuple[ModelSpending, ...]:
    """Sum rows per model, the most expensive (then the most tokens) first."""
    sums: dict[str, list[float]] = {}
    for row in rows:
        if row.model == REFUSED:
            continue
        found = sums.setdefault(row.model, [0, 0, 0, 0, 0.0])
        for n, value in enumerate((row.turns, row.input_tokens, row.output_tokens,
                                   row.cached_tokens, row.cost_usd)):
            found[n] += value
    spent = [ModelSpending(model, int(t), int(i), int(o), int(c), u)
             for model, (t, i, o, c, u) in sums.items()]
    return tuple(sorted(spent, key=lambda s: (-s.cost_usd, -(s.input_tokens + s.output_tokens),
                                              s.model)))


def user_spending(user: str, today: date, rows: Iterable[Row],
                  limits: tuple[Limit, ...] = ()) -> UserSpending:
    """Return `user`'s spending today and this month from this month's rows."""
    month = [r for r in rows if r.user == user]
    return UserSpending(user=user, day=today.isoformat(), month=today.strftime("%Y-%m"),
                        today=by_model(r for r in month if r.day == today),
                        this_month=by_model(month), limits=limits,
                        refused_today=sum(r.refusals for r in month if r.day == today),
                        refused_this_month=sum(r.refusals for r in month))


def totals(spent: Iterable[ModelSpending]) -> tuple[int, float]:
    """Return the tokens (input plus output) and USD of some models' spending."""
    tokens, usd = 0, 0.0
    for s in spent:
        tokens += s.input_tokens + s.output_tokens
        usd += s.cost_usd
    return tokens, usd
