"""The box of a notebook's kernel, as the page reads and changes it: `/jupyter-ci/box/...`.

The page's own routes (docs/protocol.md section 3, not in openapi.json): the status bar's
badge reads a kernel's box; the commands "Run this notebook unboxed" (and boxed again) and
"Allow <host> for this notebook" change the user's choices for one notebook, which the server
keeps outside the notebook file (server/sandbox/choices.py).
"""

from __future__ import annotations

from typing import Literal

from jupyter_ci.wire.frozen import frozen

#: What c.JupyterCI.notebook_sandbox may be.
NotebookSandbox = Literal["auto", "always", "never"]


@frozen
class BoxStatus:
    """GET /jupyter-ci/box?kernel=<id>: whether a kernel runs in a box, and what it may reach."""

    kernel: str
    boxed: bool
    #: Why it is not boxed ("" when it is): the user's choice, the setting, no bubblewrap...
    reason: str
    #: The notebook the kernel was started for, relative to Jupyter's root ("" if none).
    notebook: str
    #: c.JupyterCI.notebook_sandbox (under JupyterHub, after the Hub's policy).
    setting: NotebookSandbox
    #: Whether the user may run this notebook unboxed ('always' refuses it).
    may_unbox: bool
    #: What the box may reach besides its own loopback (allowlist entries).
    network: tuple[str, ...] = ()
    #: Hosts the box was refused lately, newest last, that the user may allow.
    refused: tuple[str, ...] = ()


@frozen
class BoxChoice:
    """PUT /jupyter-ci/box/notebook: run one notebook's kernels unboxed, or boxed again."""

    path: str
    boxed: bool


@frozen
class BoxAllow:
    """POST /jupyter-ci/box/hosts: let one notebook's box reach a host (host or host:port)."""

    path: str
    host: str


@frozen
class BoxNotebook:
    """The user's choices for one notebook: whether its kernels are boxed, the hosts allowed."""

    path: str
    boxed: bool
    hosts: tuple[str, ...] = ()
