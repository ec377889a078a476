"""Spending that lasts: each turn's usage and cost, per user, model and day, in a database.

SQLAlchemy Core over any URL it takes, as JupyterHub's own database (`sqlite:///...` by
default, PostgreSQL or MySQL in larger deployments); the table is created when missing.
Days are UTC dates. One row per (user, model, day) is added to as turns end: a month of a
hundred users is thousands of rows, not millions. Calls are blocking: the meter makes them
from one worker thread, in order, so a read sees every write made before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import sqlalchemy as sa
from sqlalchemy.engine import Engine

#: What a model id may be, at most, in the table (longer ones are refused before a call).
MODEL_CHARS = 255

METADATA = sa.MetaData()
SPENDING = sa.Table(
    "jupyter_ci_spending", METADATA,
    sa.Column("user", sa.String(255), primary_key=True),
    sa.Column("model", sa.String(MODEL_CHARS), primary_key=True),
    sa.Column("day", sa.Date, primary_key=True),
    sa.Column("turns", sa.Integer, nullable=False, default=0),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cached_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cost_usd", sa.Float, nullable=False, default=0.0),
)


@dataclass(frozen=True)
class Row:
    """One user's turns of one model on one day (or their sum over a window)."""

    user: str
    model: str
    day: date
    turns: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float

    @property
    def tokens(self) -> int:
        """Return input plus output tokens, what budgets count."""
        return self.input_tokens + self.output_tokens

    def plus(self, other: Row) -> Row:
        """Return this row with another's counts added (the same user, model and day)."""
        return Row(self.user, self.model, self.day, self.turns + other.turns,
                   self.input_tokens + other.input_tokens,
                   self.output_tokens + other.output_tokens,
                   self.cached_tokens + other.cached_tokens, self.cost_usd + other.cost_usd)


@dataclass
class Store:
    """The spending table behind one SQLAlchemy engine."""

    engine: Engine

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect to `url` and create the table if it is missing."""
        engine = sa.create_engine(url, pool_pre_ping=True)
        METADATA.create_all(engine)
        return cls(engine)

    def add(self, *rows: Row) -> None:
        """Add turns' usage to their users', models' and days' rows, in one transaction."""
        with self.engine.begin() as conn:
            for row in rows:
                key = (SPENDING.c.user == row.user) & (SPENDING.c.model == row.model) & (
                    SPENDING.c.day == row.day)
                added = {"turns": SPENDING.c.turns + row.turns,
                         "input_tokens": SPENDING.c.input_tokens + row.input_tokens,
                         "output_tokens": SPENDING.c.output_tokens + row.output_tokens,
                         "cached_tokens": SPENDING.c.cached_tokens + row.cached_tokens,
                         "cost_usd": SPENDING.c.cost_usd + row.cost_usd}
                # One writer thread: an update that found no row is followed by its insert.
                if conn.execute(SPENDING.update().where(key).values(**added)).rowcount == 0:
                    conn.execute(SPENDING.insert().values(
                        user=row.user, model=row.model, day=row.day, turns=row.turns,
                        input_tokens=row.input_tokens, output_tokens=row.output_tokens,
                        cached_tokens=row.cached_tokens, cost_usd=row.cost_usd))

    def since(self, first: date, user: str | None = None) -> list[Row]:
        """Return the rows from `first` on (of `user`, else everyone's), oldest first."""
        query = SPENDING.select().where(SPENDING.c.day >= first)
        if user is not None:
            query = query.where(SPENDING.c.user == user)
        query = query.order_by(SPENDING.c.day, SPENDING.c.user, SPENDING.c.model)
        with self.engine.connect() as conn:
            return [Row(r.user, r.model, r.day, r.turns, r.input_tokens, r.output_tokens,
                        r.cached_tokens, r.cost_usd) for r in conn.execute(query)]

    def close(self) -> None:
        """Close the engine's connections."""
        self.engine.dispose()

