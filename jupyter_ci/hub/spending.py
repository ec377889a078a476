"""Spending as users and admins see it: the database's rows summed by user and model."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from jupyter_ci.hub.store import Row
from jupyter_ci.wire.hub import Limit, ModelSpending, UserSpending


def by_model(rows: Iterable[Row]) -> tuple[ModelSpending, ...]:
    """Sum rows per model, the most expensive (then the most tokens) first."""
    sums: dict[str, list[float]] = {}
    for row in rows:
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
                        this_month=by_model(month), limits=limits)


def totals(spent: Iterable[ModelSpending]) -> tuple[int, float]:
    """Return the tokens (input plus output) and USD of some models' spending."""
    tokens, usd = 0, 0.0
    for s in spent:
        tokens += s.input_tokens + s.output_tokens
        usd += s.cost_usd
    return tokens, usd
