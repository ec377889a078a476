"""The budgets of model calls: tokens and USD that kernels and the server may use.

One logic over two units. Each call reserves what it may cost before it starts and settles
on what it used, so calls running at once see each other: together they pass a limit by
one reservation at most. Tokens count input + output as providers report them; USD is
priced by the model the call names (agent/cost.py, with c.JupyterCI.prices), and a model
without a price is refused by the model service while a money limit is set. A holder is a
kernel (counted over its restarts), or a REST session's asks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from jupyter_ci.agent.cost import dollars

#: What a budget counts: whole tokens, or USD.
N = TypeVar("N", int, float)
#: Less than this is left of a reservation: none (USD sums are not exact).
_EPSILON = 1e-12


@dataclass(frozen=True)
class Unit(Generic[N]):
    """What one budget counts, and how its refusals name an amount and the settings."""

    zero: N
    #: Writes an amount used or reserved.
    show: Callable[[N], str]
    #: Writes a limit as its setting takes it.
    show_limit: Callable[[N], str]
    #: The refusal once the server's limit is reached ({used}, {reserved}, {limit}).
    server_full: str
    #: The refusal once a kernel's (or session's) limit is reached.
    kernel_full: str


TOKENS: Unit[int] = Unit(
    0, str, str,
    "This Jupyter server has used {used} model tokens ({reserved} more are reserved by calls "
    "running now), its budget c.JupyterCI.max_tokens_per_server = {limit}. Raise it "
    "(0 = unlimited) and restart the server to go on.",
    "This kernel has used {used} model tokens ({reserved} more are reserved by calls running "
    "now), its budget c.JupyterCI.max_tokens_per_kernel = {limit}. Shut it down and start a "
    "new kernel, or raise the setting (0 = unlimited).")
USD: Unit[float] = Unit(
    0.0, dollars, lambda limit: f"{limit:g}",
    "This Jupyter server has spent {used} on model calls ({reserved} more is reserved by "
    "calls running now), its money budget c.JupyterCI.max_cost_per_server = {limit} (USD). "
    "Raise it (0 = unlimited) and restart the server to go on.",
    "This kernel has spent {used} on model calls ({reserved} more is reserved by calls "
    "running now), its money budget c.JupyterCI.max_cost_per_kernel = {limit} (USD). Shut "
    "it down and start a new kernel, or raise the setting (0 = unlimited) and restart the "
    "server.")


@dataclass
class Budget(Generic[N]):
    """One unit's limits per holder and for the server, and what was used and reserved."""

    unit: Unit[N]
    #: Per kernel or session, over restarts (0 = unlimited): c.JupyterCI.max_*_per_kernel.
    per_kernel: N
    #: For the whole server run (0 = unlimited): c.JupyterCI.max_*_per_server.
    per_server: N
    server_used: N
    server_reserved: N
    kernel_used: dict[str, N] = field(default_factory=dict)
    kernel_reserved: dict[str, N] = field(default_factory=dict)

    @classmethod
    def of(cls, unit: Unit[N]) -> Budget[N]:
        """Return an unlimited budget of `unit` with nothing used."""
        return cls(unit, unit.zero, unit.zero, unit.zero, unit.zero)

    @property
    def active(self) -> bool:
        """Say whether any limit is set."""
        return self.per_kernel > 0 or self.per_server > 0

    def exceeded(self, holder: str) -> str | None:
        """Say which limit `holder` has reached (counting open reservations), or None."""
        unit = self.unit
        if self.per_server and self.server_used + self.server_reserved >= self.per_server:
            return unit.server_full.format(used=unit.show(self.server_used),
                                           reserved=unit.show(self.server_reserved),
                                           limit=unit.show_limit(self.per_server))
        used = self.kernel_used.get(holder, unit.zero)
        reserved = self.kernel_reserved.get(holder, unit.zero)
        if self.per_kernel and used + reserved >= self.per_kernel:
            return unit.kernel_full.format(used=unit.show(used), reserved=unit.show(reserved),
                                           limit=unit.show_limit(self.per_kernel))
        return None

    def reserve(self, holder: str, amount: N) -> N:
        """Set `amount` aside for a call of `holder` (checked by `exceeded` first)."""
        amount = max(amount, self.unit.zero)
        self.server_reserved += amount
        if holder in self.kernel_used:
            self.kernel_reserved[holder] = self.kernel_reserved.get(holder, self.unit.zero) \
                + amount
        return amount

    def settle(self, holder: str, reserved: N, used: N) -> None:
        """End a reservation of `reserved`, charging what the call used."""
        self.server_reserved = max(self.unit.zero, self.server_reserved - reserved)
        left = self.kernel_reserved.get(holder, self.unit.zero) - reserved
        if left > _EPSILON:
            self.kernel_reserved[holder] = left
        else:
            self.kernel_reserved.pop(holder, None)
        if used > 0:
            self.server_used += used
            # Only known holders: a reply that ends after its kernel was shut down counts
            # for the server but must not bring the shut-down kernel's entry back.
            if holder in self.kernel_used:
                self.kernel_used[holder] += used

    def open(self, holder: str) -> None:
        """Start counting for a kernel or session (kept over its restarts)."""
        self.kernel_used.setdefault(holder, self.unit.zero)

    def close(self, holder: str) -> None:
        """Stop counting for a kernel or session that is gone."""
        self.kernel_used.pop(holder, None)
        self.kernel_reserved.pop(holder, None)

    def rebind(self, old: str, new: str) -> None:
        """Count what `old` used for `new` from now on."""
        if old in self.kernel_used:
            self.kernel_used[new] = self.kernel_used.pop(old)
        if old in self.kernel_reserved:
            self.kernel_reserved[new] = self.kernel_reserved.pop(old)


@dataclass(frozen=True)
class Reservation:
    """Tokens and USD set aside for one model call until its usage is known."""

    holder: str
    tokens: int
    #: Priced by the model the call names.
    usd: float = 0.0
    #: The model the call names (canonical id), for a meter that records by model.
    model: str = ""


def _tokens() -> Budget[int]:
    return Budget.of(TOKENS)


def _money() -> Budget[float]:
    return Budget.of(USD)


@dataclass
class Budgets:
    """The token and the money budget, kept for the same holders."""

    #: c.JupyterCI.max_tokens_per_kernel and max_tokens_per_server.
    tokens: Budget[int] = field(default_factory=_tokens)
    #: c.JupyterCI.max_cost_per_kernel and max_cost_per_server (USD).
    money: Budget[float] = field(default_factory=_money)

    def reserve(self, holder: str, tokens: int, usd: float = 0.0) -> Reservation | str:
        """Set `tokens` and `usd` aside for a call of `holder`, or say which limit refuses."""
        reason = self.tokens.exceeded(holder) or self.money.exceeded(holder)
        if reason is not None:
            return reason
        return Reservation(holder, self.tokens.reserve(holder, tokens),
                           self.money.reserve(holder, usd))

    def settle(self, reservation: Reservation, tokens: int, usd: float = 0.0) -> None:
        """End a reservation, charging what the call used (tokens, and USD)."""
        self.money.settle(reservation.holder, reservation.usd, usd)
        self.tokens.settle(reservation.holder, reservation.tokens, tokens)

    def open(self, holder: str) -> None:
        """Start counting for a kernel or session (kept over its restarts)."""
        self.tokens.open(holder)
        self.money.open(holder)

    def close(self, holder: str) -> None:
        """Stop counting for a kernel or session that is gone."""
        self.tokens.close(holder)
        self.money.close(holder)

    def rebind(self, old: str, new: str) -> None:
        """Count what `old` used for `new` from now on."""
        self.tokens.rebind(old, new)
        self.money.rebind(old, new)
