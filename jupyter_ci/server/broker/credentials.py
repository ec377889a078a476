"""Model credentials: a token per kernel (the budgets they draw on are in budget.py).

A kernel gets its own token when the server starts it, a new one when it restarts, and
none once it is shut down or dead: a token copied out of a kernel (into a file, a child
process, another machine) stops working with the kernel it belonged to. Only digests are
kept, so looking a token up takes the same time whatever its first bytes are.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field


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
