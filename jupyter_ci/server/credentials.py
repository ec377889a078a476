"""Broker credentials: a token per kernel, and the token budget of kernels and the server.

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


@dataclass
class Budget:
    """Tokens (input + output, as providers report them) kernels and the server may use."""

    #: Per kernel, over its restarts (0 = unlimited): c.JupyterCI.max_tokens_per_kernel.
    per_kernel: int = 0
    #: For the whole server run (0 = unlimited): c.JupyterCI.max_tokens_per_server.
    per_server: int = 0
    server_used: int = 0
    kernel_used: dict[str, int] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Say whether any limit is set."""
        return self.per_kernel > 0 or self.per_server > 0

    def exceeded(self, kernel_id: str) -> str | None:
        """Say which limit `kernel_id` has reached, or None while it may go on."""
        if self.per_server and self.server_used >= self.per_server:
            return (f"This Jupyter server has used {self.server_used} model tokens, its "
                    f"budget c.JupyterCI.max_tokens_per_server = {self.per_server}. Raise it "
                    "(0 = unlimited) and restart the server to go on.")
        used = self.kernel_used.get(kernel_id, 0)
        if self.per_kernel and used >= self.per_kernel:
            return (f"This kernel has used {used} model tokens, its budget "
                    f"c.JupyterCI.max_tokens_per_kernel = {self.per_kernel}. Shut it down and "
                    "start a new kernel, or raise the setting (0 = unlimited).")
        return None

    def charge(self, kernel_id: str, tokens: int) -> None:
        """Add the tokens one reply used to its kernel's and the server's counts."""
        if tokens <= 0:
            return
        self.server_used += tokens
        # Only known kernels: a reply that ends after its kernel was shut down counts for
        # the server but must not bring the shut-down kernel's entry back.
        if kernel_id in self.kernel_used:
            self.kernel_used[kernel_id] += tokens

    def open(self, kernel_id: str) -> None:
        """Start counting for a kernel (kept over its restarts)."""
        self.kernel_used.setdefault(kernel_id, 0)

    def close(self, kernel_id: str) -> None:
        """Stop counting for a kernel that is gone."""
        self.kernel_used.pop(kernel_id, None)

    def rebind(self, old: str, new: str) -> None:
        """Count what `old` used for `new` from now on."""
        if old in self.kernel_used:
            self.kernel_used[new] = self.kernel_used.pop(old)
