"""Spending that lasts: each turn's usage and cost, per user, model and day, in a database.

SQLAlchemy Core over any URL it takes, as JupyterHub's own database (`sqlite:///...` by
default, PostgreSQL or MySQL in larger deployments); the table is created when missing.
Days are UTC dates. One row per (user, model, day) is added to as turns end: a month of a
hundred users is thousands of rows, not millions. Refused turns (a model the policy does not
allow, a budget used up, a turn the provider refused before spending anything) add to one
row per user and day, under the model REFUSED, whatever model they named: the caller chooses
that text, so a client that repeats refused turns grows a counter, never the table. Calls are
blocking: the meter makes them from one worker thread, in order, so a read sees every write
made before it. A SQLite file is the owner's alone (0600, its folder 0700 when made here):
it holds every user's spending.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url

#: What a model id may be, at most, in the table (longer ones are refused before a call).
MODEL_CHARS = 255
#: The model of a user's day's refused turns: no model id has no ":".
REFUSED = "(refused)"
#: The files SQLite keeps beside a database: its rollback journal, write-ahead log, index.
SQLITE_SIDES = ("-journal", "-wal", "-shm")

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
    # A server default, so that a table made before it gains the column (Store.open).
    sa.Column("refusals", sa.Integer, nullable=False, default=0, server_default="0"),
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
    #: Turns refused (in the REFUSED row).
    refusals: int = 0

    @property
    def tokens(self) -> int:
        """Return input plus output tokens, what budgets count."""
        return self.input_tokens + self.output_tokens

    def plus(self, other: Row) -> Row:
        """Return this row with another's counts added (the same user, model and day)."""
        return Row(self.user, self.model, self.day, self.turns + other.turns,
                   self.input_tokens + other.input_tokens,
                   self.output_tokens + other.output_tokens,
                   self.cached_tokens + other.cached_tokens, self.cost_usd + other.cost_usd,
                   self.refusals + other.refusals)


@dataclass
class Store:
    """The spending table behind one SQLAlchemy engine."""

    engine: Engine

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect to `url` and create the table if it is missing (or add what it lacks)."""
        private_sqlite(url)
        engine = sa.create_engine(url, pool_pre_ping=True)
        METADATA.create_all(engine)
        if "refusals" not in {c["name"] for c in sa.inspect(engine).get_columns(SPENDING.name)}:
            with engine.begin() as conn:  # a table of an earlier jupyter-ci
                conn.execute(sa.text(f"ALTER TABLE {SPENDING.name} ADD COLUMN refusals "
                                     "INTEGER NOT NULL DEFAULT 0"))
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
                         "cost_usd": SPENDING.c.cost_usd + row.cost_usd,
                         "refusals": SPENDING.c.refusals + row.refusals}
                # One writer thread: an update that found no row is followed by its insert.
                if conn.execute(SPENDING.update().where(key).values(**added)).rowcount == 0:
                    conn.execute(SPENDING.insert().values(
                        user=row.user, model=row.model, day=row.day, turns=row.turns,
                        input_tokens=row.input_tokens, output_tokens=row.output_tokens,
                        cached_tokens=row.cached_tokens, cost_usd=row.cost_usd,
                        refusals=row.refusals))

    def since(self, first: date, user: str | None = None,
              users: list[str] | None = None) -> list[Row]:
        """Return the rows from `first` on (of `user`, or of `users`, else everyone's),
        oldest first."""
        query = SPENDING.select().where(SPENDING.c.day >= first)
        if user is not None:
            query = query.where(SPENDING.c.user == user)
        if users is not None:
            query = query.where(SPENDING.c.user.in_(users))
        query = query.order_by(SPENDING.c.day, SPENDING.c.user, SPENDING.c.model)
        with self.engine.connect() as conn:
            return [Row(r.user, r.model, r.day, r.turns, r.input_tokens, r.output_tokens,
                        r.cached_tokens, r.cost_usd, r.refusals) for r in conn.execute(query)]

    def users_since(self, first: date, after: str, limit: int) -> list[str]:
        """Return up to `limit` users with rows from `first` on, by name, after `after`."""
        query = (sa.select(SPENDING.c.user).distinct()
                 .where(SPENDING.c.day >= first, SPENDING.c.user > after)
                 .order_by(SPENDING.c.user).limit(limit))
        with self.engine.connect() as conn:
            return [str(name) for name in conn.execute(query).scalars()]

    def close(self) -> None:
        """Close the engine's connections."""
        self.engine.dispose()


def private_sqlite(url: str) -> None:
    """Make a SQLite database file of `url` (and a missing folder) the owner's alone."""
    parsed = make_url(url)
    path = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or path in ("", ":memory:") or path.startswith(
            "file:") or parsed.query.get("uri"):
        return  # not a plain file: memory, or a URI whose form SQLite reads itself
    where = Path(path).absolute()
    missing = [f for f in (where.parent, *where.parent.parents) if not f.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=0o700)
        folder.chmod(0o700)  # mkdir's mode passes through the umask
    # Created here first, so SQLite never makes it under a loose umask; SQLite gives its
    # journal and WAL files the database file's mode. A file of an earlier jupyter-ci, made
    # 0644, is tightened as well.
    fd = os.open(where, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        if os.fstat(fd).st_uid == os.geteuid():  # another's file keeps the mode they chose
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for side in SQLITE_SIDES:
        with_side = where.with_name(where.name + side)
        if with_side.is_file() and not with_side.is_symlink() and (
                with_side.stat().st_uid == os.geteuid()):
            with_side.chmod(0o600)
