"""Model credentials: a token per kernel, and the token budget of kernels and the server.

A kernel gets its own token when the server starts it, a new one when it restarts, and
none once it is shut down or dead: a token copied out of a kernel (into a file, a child
process, another machine) stops working with the kernel it belonged to. Only digests are
kept, so looking a token up takes the same time whatever its first bytes are.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

from jupyter_ci.server.broker.spend import Spend


def _digest(token: str) -> bytes:
    """Hash a token for lookup (headers are latin-1 strings; any str encodes)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@dataclass(repr=False)
class Credentials:
    """The live tokens, each naming the kernel it was issued to."""

    _kernels: dict[str, bytes] = field(default_factory=dict)
    _tokens: dict[bytes, str] = field(default_factory=dict)

    def issue(self, kernel_id: str) -> str:
        """Return a new token for `kernel_id`, revoking the one it had."""
        self.revoke(kernel_id)
        token = secrets.token_urlsafe(32)
        digest = _digest(token)
        self._kernels[kernel_id] = digest
        self._tokens[digest] = kernel_id
        return token

    def revoke(self, kernel_id: str) -> None:
        """Make the token of `kernel_id` worthless (nothing happens if it had none)."""
        digest = self._kernels.pop(kernel_id, None)
        if digest is not None:
            self._tokens.pop(digest, None)

    def rebind(self, old: str, new: str) -> None:
        """Move the live token of `old` to `new` (a kernel whose id is known after its start)."""
        digest = self._kernels.pop(old, None)
        if digest is not None:
            self.revoke(new)
            self._kernels[new] = digest
            self._tokens[digest] = new

    def kernel_for(self, presented: str) -> str | None:
        """Return the kernel a presented token belongs to, or None for any other string."""
        return self._tokens.get(_digest(presented)) if presented else None

    def __len__(self) -> int:
        """Count the live tokens."""
        return len(self._tokens)

    def __repr__(self) -> str:
        """Show how many tokens are live, never a token."""
        return f"Credentials({len(self)} live)"


@dataclass(frozen=True)
class Reservation:
    """Tokens set aside for one model call until its usage is known."""

    holder: str
    tokens: int
    #: USD set aside too (the money budget), priced by the model the call names.
    usd: float = 0.0


@dataclass
class Budget:
    """Tokens (input + output, as providers report them) kernels and the server may use.

    Each call reserves what it may cost before it starts and settles on what it used, so
    calls running at once see each other: together they pass a limit by one reservation
    at most. A holder is a kernel, or a REST session's asks.
    """

    #: Per kernel or session, over restarts (0 = unlimited): c.JupyterCI.max_tokens_per_kernel.
    per_kernel: int = 0
    #: For the whole server run (0 = unlimited): c.JupyterCI.max_tokens_per_server.
    per_server: int = 0
    server_used: int = 0
    kernel_used: dict[str, int] = field(default_factory=dict)
    server_reserved: int = 0
    kernel_reserved: dict[str, int] = field(default_factory=dict)
    #: The money budget, kept for the same holders (c.JupyterCI.max_cost_per_*).
    money: Spend = field(default_factory=Spend)

    @property
    def active(self) -> bool:
        """Say whether any limit is set."""
        return self.per_kernel > 0 or self.per_server > 0

    def exceeded(self, holder: str) -> str | None:
        """Say which limit `holder` has reached (counting open reservations), or None."""
        if self.per_server and self.server_used + self.server_reserved >= self.per_server:
            return (f"This Jupyter server has used {self.server_used} model tokens "
                    f"({self.server_reserved} more are reserved by calls running now), its "
                    f"budget c.JupyterCI.max_tokens_per_server = {self.per_server}. Raise it "
                    "(0 = unlimited) and restart the server to go on.")
        used = self.kernel_used.get(holder, 0)
        reserved = self.kernel_reserved.get(holder, 0)
        if self.per_kernel and used + reserved >= self.per_kernel:
            return (f"This kernel has used {used} model tokens ({reserved} more are reserved "
                    f"by calls running now), its budget c.JupyterCI.max_tokens_per_kernel = "
                    f"{self.per_kernel}. Shut it down and start a new kernel, or raise the "
                    "setting (0 = unlimited).")
        return None

    def reserve(self, holder: str, tokens: int, usd: float = 0.0) -> Reservation | str:
        """Set `tokens` (and `usd`) aside for a call of `holder`, or say which limit refuses."""
        reason = self.exceeded(holder) or self.money.exceeded(holder)
        if reason is not None:
            return reason
        self.money.reserve(holder, usd)
        tokens = max(tokens, 0)
        self.server_reserved += tokens
        if holder in self.kernel_used:
            self.kernel_reserved[holder] = self.kernel_reserved.get(holder, 0) + tokens
        return Reservation(holder, tokens, max(usd, 0.0))

    def settle(self, reservation: Reservation, tokens: int, usd: float = 0.0) -> None:
        """End a reservation, charging what the call used (tokens, and USD)."""
        self.money.settle(reservation.holder, reservation.usd, usd)
        self.server_reserved = max(0, self.server_reserved - reservation.tokens)
        left = self.kernel_reserved.get(reservation.holder, 0) - reservation.tokens
        if left > 0:
            self.kernel_reserved[reservation.holder] = left
        else:
            self.kernel_reserved.pop(reservation.holder, None)
        self.charge(reservation.holder, tokens)

    def charge(self, holder: str, tokens: int) -> None:
        """Add the tokens one reply used to its holder's and the server's counts."""
        if tokens <= 0:
            return
        self.server_used += tokens
        # Only known holders: a reply that ends after its kernel was shut down counts for
        # the server but must not bring the shut-down kernel's entry back.
        if holder in self.kernel_used:
            self.kernel_used[holder] += tokens

    def open(self, holder: str) -> None:
        """Start counting for a kernel or session (kept over its restarts)."""
        self.kernel_used.setdefault(holder, 0)
        self.money.open(holder)

    def close(self, holder: str) -> None:
        """Stop counting for a kernel or session that is gone."""
        self.kernel_used.pop(holder, None)
        self.kernel_reserved.pop(holder, None)
        self.money.close(holder)

    def rebind(self, old: str, new: str) -> None:
        """Count what `old` used for `new` from now on."""
        if old in self.kernel_used:
            self.kernel_used[new] = self.kernel_used.pop(old)
        if old in self.kernel_reserved:
            self.kernel_reserved[new] = self.kernel_reserved.pop(old)
        self.money.rebind(old, new)
