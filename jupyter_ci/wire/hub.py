"""The JupyterHub service's wire: what a user's server is told, and spending as it is shown.

Users' servers under a Hub hold no provider key: their model service sends each turn (the
same `TurnRequest` as a kernel's, wire/turn.py) to the Hub's jupyter-ci service as the user,
and reads the user's policy from it (`UserPolicy`): the approval floor and the boxing it
applies, the models it offers. Spending comes back as `UserSpending` (a user's own, and the
rows of the admins' `AllSpending`). Dates are UTC: `day` is YYYY-MM-DD, `month` YYYY-MM.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from jupyter_ci.wire.codec import OMIT_IF, ROUND
from jupyter_ci.wire.frozen import frozen

#: The service's name in the Hub's config (c.JupyterHub.services): its URL prefix is
#: /services/<name>/ and the scope that reaches it access:services!service=<name>.
SERVICE_NAME = "jupyter-ci"
#: In a user's server: the service's base URL (ends with its prefix), set by the Hub.
ENV_HUB_URL = "JUPYTER_CI_HUB_URL"
#: Below the service's URL: GET the caller's policy (UserPolicy).
POLICY_PATH = "policy"
#: Below the service's URL: GET the caller's spending (UserSpending).
SPENDING_PATH = "spending"
#: Below the service's URL: the admins' page (HTML), and its JSON (AllSpending).
ADMIN_PATH = "admin"
ADMIN_SPENDING_PATH = "admin/spending"
#: Users a page of admin/spending (and the admin page) holds unless `?limit=` says, and the
#: most it may say.
ADMIN_PAGE_LIMIT = 100
ADMIN_PAGE_MAX = 500

Approval = Literal["never", "first", "plan", "each"]
#: A budget's window and unit.
LimitName = Literal["tokens_per_day", "tokens_per_month", "usd_per_day", "usd_per_month"]


@frozen
class Price:
    """One model's prices, as c.JupyterCI.prices takes them: USD per million tokens."""

    input: float
    output: float
    cached_input: float | None = field(default=None, metadata={OMIT_IF: None})
    #: In tokens.
    context_window: int | None = field(default=None, metadata={OMIT_IF: None})


@frozen
class Limit:
    """One budget a user has, how much of it is used, and when it starts again."""

    name: LimitName
    #: Tokens (input plus output), or USD.
    limit: float
    used: float = field(metadata={ROUND: 6})
    #: When the window ends (UTC, ISO 8601): the next midnight, or the next month's first.
    resets: str
    #: Where the Hub's policy sets it: "user <name>", "group <name>" or "default".
    source: str


@frozen(kw_only=True)
class UserPolicy:
    """GET policy: what the caller's server applies, and what the service enforces."""

    user: str
    #: Model ids or shell-style patterns (`openai:*`; `*`: any model) the user may call;
    #: empty: none.
    models: tuple[str, ...] = ("*",)
    #: The default model for the user's asks; "" lets the server pick.
    model: str = ""
    #: Providers the service holds a key (or a keyless URL) for.
    providers: tuple[str, ...] = ()
    #: The least approval every ask of the user gets (the server applies it).
    approval_minimum: Approval = "never"
    #: REST sessions must run in a box (the server refuses one it cannot box).
    boxed: bool = False
    #: The service's price table (c.JupyterCI.prices' form), so costs shown match its own.
    prices: dict[str, Price] = field(default_factory=dict)
    limits: tuple[Limit, ...] = ()


@frozen
class ModelSpending:
    """What one user's turns of one model used over a window."""

    model: str
    turns: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    #: Of the turns' models' prices; 0 for a model without one.
    cost_usd: float = field(default=0.0, metadata={ROUND: 6})


@frozen(kw_only=True)
class UserSpending:
    """GET spending: a user's spending today and this month, by model, and their limits."""

    user: str
    day: str
    month: str
    today: tuple[ModelSpending, ...] = ()
    this_month: tuple[ModelSpending, ...] = ()
    limits: tuple[Limit, ...] = field(default=(), metadata={OMIT_IF: ()})
    #: Turns the service refused (a model not allowed, a budget used up, nothing spent).
    refused_today: int = field(default=0, metadata={OMIT_IF: 0})
    refused_this_month: int = field(default=0, metadata={OMIT_IF: 0})


@frozen(kw_only=True)
class AllSpending:
    """GET admin/spending: one page of the users who spent this month (admins only), by name.

    `?limit=` users a page (default and most: ADMIN_PAGE_LIMIT, ADMIN_PAGE_MAX), `?cursor=`
    the `next` of the page before.
    """

    day: str
    month: str
    users: tuple[UserSpending, ...] = ()
    #: Whether users follow this page.
    more: bool = False
    #: The cursor of the next page ("" when there is none).
    next: str = field(default="", metadata={OMIT_IF: ""})
