"""The money budget: USD kernels and the server may spend, beside the token budget.

Each model call is priced by the model it names (agent/cost.py, with c.JupyterCI.prices);
it reserves what it may cost before it starts and settles on what its reported usage
cost, like the token budget (credentials.Budget, which holds one of these and keeps it
open, closed and rebound with its own holders). A model without a price is refused by the
model service while a money limit is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jupyter_ci.agent.cost import dollars


@dataclass
class Spend:
    """USD spent and reserved per holder (a kernel, a session's asks) and for the server."""

    #: Per kernel or session, over restarts (0 = unlimited): c.JupyterCI.max_cost_per_kernel.
    per_kernel: float = 0.0
    #: For the whole server run (0 = unlimited): c.JupyterCI.max_cost_per_server.
    per_server: float = 0.0
    server_spent: float = 0.0
    kernel_spent: dict[str, float] = field(default_factory=dict)
    server_reserved: float = 0.0
    kernel_reserved: dict[str, float] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Say whether any money limit is set."""
        return self.per_kernel > 0 or self.per_server > 0

    def exceeded(self, holder: str) -> str | None:
        """Say which money limit `holder` has reached (counting reservations), or None."""
        if self.per_server and self.server_spent + self.server_reserved >= self.per_server:
            return (f"This Jupyter server has spent {dollars(self.server_spent)} on model calls "
                    f"({dollars(self.server_reserved)} more is reserved by calls running now), "
                    f"its money budget c.JupyterCI.max_cost_per_server = {self.per_server:g} "
                    "(USD). Raise it (0 = unlimited) and restart the server to go on.")
        spent = self.kernel_spent.get(holder, 0.0)
        reserved = self.kernel_reserved.get(holder, 0.0)
        if self.per_kernel and spent + reserved >= self.per_kernel:
            return (f"This kernel has spent {dollars(spent)} on model calls ({dollars(reserved)} "
                    "more is reserved by calls running now), its money budget "
                    f"c.JupyterCI.max_cost_per_kernel = {self.per_kernel:g} (USD). Shut it "
                    "down and start a new kernel, or raise the setting (0 = unlimited) and "
                    "restart the server.")
        return None

    def reserve(self, holder: str, usd: float) -> None:
        """Set `usd` aside for a call of `holder` (checked by `exceeded` first)."""
        usd = max(usd, 0.0)
        self.server_reserved += usd
        if holder in self.kernel_spent:
            self.kernel_reserved[holder] = self.kernel_reserved.get(holder, 0.0) + usd

    def settle(self, holder: str, reserved: float, usd: float) -> None:
        """End a reservation of `reserved`, charging what the call cost."""
        self.server_reserved = max(0.0, self.server_reserved - reserved)
        left = self.kernel_reserved.get(holder, 0.0) - reserved
        if left > 1e-12:
            self.kernel_reserved[holder] = left
        else:
            self.kernel_reserved.pop(holder, None)
        if usd > 0:
            self.server_spent += usd
            if holder in self.kernel_spent:  # not a shut-down kernel's entry brought back
                self.kernel_spent[holder] += usd

    def open(self, holder: str) -> None:
        """Start counting for a kernel or session (kept over its restarts)."""
        self.kernel_spent.setdefault(holder, 0.0)

    def close(self, holder: str) -> None:
        """Stop counting for a kernel or session that is gone."""
        self.kernel_spent.pop(holder, None)
        self.kernel_reserved.pop(holder, None)

    def rebind(self, old: str, new: str) -> None:
        """Count what `old` spent for `new` from now on."""
        if old in self.kernel_spent:
            self.kernel_spent[new] = self.kernel_spent.pop(old)
        if old in self.kernel_reserved:
            self.kernel_reserved[new] = self.kernel_reserved.pop(old)
