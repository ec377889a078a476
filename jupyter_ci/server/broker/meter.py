"""What a model turn may spend, and who is charged: the model service asks its meter.

The model service (model_service.py) is one implementation of a turn for every place that
holds keys; what differs is who judges a turn. A single Jupyter server charges its kernels'
and sessions' budgets (`ServerMeter`, over budget.py); the JupyterHub service charges each
user's policy and records the spending in its database (jupyter_ci/hub/meter.py). Both
reserve a turn's bound before the provider is called and settle on what it reported.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from jupyter_ci.agent.cost import EXAMPLE, Rates
from jupyter_ci.agent.errors import LimitReached, ModelConfigError
from jupyter_ci.agent.types import ModelReply
from jupyter_ci.server.broker.budget import Budgets, Reservation


class Meter(Protocol):
    """Judges and charges the turns of the model service."""

    def admit(self, holder: str | None, model_id: str, rates: Rates | None) -> None:
        """Raise the AskError that keeps `holder` (None: any caller) from `model_id`."""
        ...

    def reserve(self, holder: str, model_id: str, tokens: int, usd: float) -> Reservation:
        """Set a turn's bound aside for `holder`, or raise LimitReached naming the limit."""
        ...

    def settle(self, reservation: Reservation, spent: ModelReply | None, usd: float) -> None:
        """End a reservation, charging what the turn used (None: the whole reservation)."""
        ...

    def open(self, holder: str) -> None:
        """Start counting for `holder` (a session's asks; kernels open at their start)."""
        ...

    def close(self, holder: str) -> None:
        """Forget `holder`, which is gone."""
        ...


@dataclass
class ServerMeter:
    """A Jupyter server's budgets: per kernel or session, and for the whole server run."""

    budget: Budgets

    def admit(self, holder: str | None, model_id: str, rates: Rates | None) -> None:
        """Refuse a model without a price while a money budget is set: it could not be counted."""
        money = self.budget.money
        if rates is None and money.active:
            raise ModelConfigError(
                f"{model_id} has no price, and this server limits what model calls may cost "
                f"(c.JupyterCI.max_cost_per_kernel = {money.per_kernel:g}, "
                f"max_cost_per_server = {money.per_server:g} USD): its calls could not be "
                "counted, so none is made.",
                unpriced_hint(model_id, "the server's config, c.JupyterCI.prices"))

    def reserve(self, holder: str, model_id: str, tokens: int, usd: float) -> Reservation:
        """Reserve in the kernel's (or session's) and the server's budgets."""
        reservation = self.budget.reserve(holder, tokens, usd)
        if isinstance(reservation, str):
            raise LimitReached(reservation, "")
        return replace(reservation, model=model_id)

    def settle(self, reservation: Reservation, spent: ModelReply | None, usd: float) -> None:
        """Charge tokens (input plus output) and USD."""
        if spent is None:
            self.budget.settle(reservation, reservation.tokens, reservation.usd)
        else:
            self.budget.settle(reservation, spent.input_tokens + spent.output_tokens, usd)

    def open(self, holder: str) -> None:
        """Start counting for a session's asks."""
        self.budget.open(holder)

    def close(self, holder: str) -> None:
        """Forget a session that is gone."""
        self.budget.close(holder)


def unpriced_hint(model_id: str, setting: str) -> str:
    """Say how to price `model_id` in `setting`, or to pick a priced model."""
    return (f"Add its price to {setting} = {{{model_id!r}: {EXAMPLE.split(' (')[0]}}} (USD "
            "per million tokens), or pick a priced model.")
