"""The Hub's policy: what each user may call and spend, from the admin's config.

The admin writes it once in jupyterhub_config.py (`configure(c, policy=...)`, deploy.py):

    {"default": {"models": ["openai:gpt-5-mini"], "usd_per_month": 20, "boxed": True},
     "groups": {"research": {"models": ["openai:*", "anthropic:*"], "usd_per_month": 200}},
     "users": {"alice": {"tokens_per_day": 0}}}

A user's rules are the default's, then their groups' (for a user in several, each rule the
most generous any of them sets: the union of their models, the largest budget, 0 meaning
unlimited; the lowest approval floor; boxed only when every group that says requires it),
then their own entry's. The service enforces models and budgets itself; the user's server
applies the approval floor and boxing, which it reads from the service. Read strictly: an
unknown rule or a wrong type fails the Hub's start, naming where it is.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import cast, get_args

from jupyter_ci.wire.hub import Approval, LimitName

#: The budgets a rule may set, in the order they are checked and shown.
BUDGETS: tuple[LimitName, ...] = get_args(LimitName)
APPROVALS: tuple[Approval, ...] = get_args(Approval)
#: The sections of the policy.
SECTIONS = ("default", "groups", "users")


class PolicyError(ValueError):
    """A policy that cannot be read; the message names the entry and what is wrong."""


@dataclass(frozen=True)
class Rule:
    """One entry of the policy; None: not set here (an earlier entry's value stands)."""

    #: Model ids or shell-style patterns (`openai:*`, `*`); empty: none at all.
    models: tuple[str, ...] | None = None
    #: The default model of the user's asks.
    model: str | None = None
    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    usd_per_day: float | None = None
    usd_per_month: float | None = None
    approval_minimum: Approval | None = None
    boxed: bool | None = None


@dataclass(frozen=True)
class Rules:
    """What applies to one user, and which entry set each rule (for messages)."""

    rule: Rule
    #: Rule name -> "default", "group <name>" or "user <name>".
    sources: dict[str, str] = field(default_factory=dict)

    def allows(self, model_id: str) -> bool:
        """Say whether the user may call `model_id` (canonical `provider:model`)."""
        patterns = self.rule.models
        if patterns is None:
            return True  # no entry limits models; an empty list allows none
        lowered = model_id.lower()
        return any(fnmatch.fnmatchcase(lowered, p.lower()) for p in patterns)

    def budget(self, name: LimitName) -> float:
        """Return a budget's limit (0: unlimited)."""
        value = getattr(self.rule, name)
        return 0.0 if value is None else float(value)

    def source(self, name: str) -> str:
        """Say which entry set the rule `name`."""
        return self.sources.get(name, "default")


@dataclass(frozen=True)
class Policy:
    """The whole policy as the admin wrote it."""

    default: Rule = field(default_factory=Rule)
    groups: dict[str, Rule] = field(default_factory=dict)
    users: dict[str, Rule] = field(default_factory=dict)

    def rules_for(self, user: str, groups: Iterable[str]) -> Rules:
        """Return the rules of `user`, a member of `groups`."""
        theirs = set(groups)
        member = [name for name in self.groups if name in theirs]
        sources = {f.name: "default" for f in fields(Rule)}
        rule = self.default
        merged = _generous([self.groups[name] for name in member])
        for f in fields(Rule):
            from_groups = getattr(merged, f.name)
            if from_groups is not None:
                rule = replace(rule, **{f.name: from_groups})
                setters = [g for g in member if getattr(self.groups[g], f.name) is not None]
                sources[f.name] = "group " + ", ".join(setters)
        own = self.users.get(user)
        if own is not None:
            for f in fields(Rule):
                if getattr(own, f.name) is not None:
                    rule = replace(rule, **{f.name: getattr(own, f.name)})
                    sources[f.name] = f"user {user}"
        return Rules(rule, sources)


def _generous(rules: list[Rule]) -> Rule:
    """Merge the rules of a user's groups, each the most generous any of them sets."""
    def setting(name: str) -> list[object]:
        return [v for r in rules if (v := getattr(r, name)) is not None]

    models = cast(list[tuple[str, ...]], setting("models"))
    budgets: dict[str, float | None] = dict.fromkeys(BUDGETS)
    for name in BUDGETS:
        values = cast(list[float], setting(name))
        if values:
            budgets[name] = 0 if 0 in values else max(values)
    approvals = cast(list[Approval], setting("approval_minimum"))
    boxed = cast(list[bool], setting("boxed"))
    chosen = cast(list[str], setting("model"))
    tokens = {n: None if v is None else int(v) for n, v in budgets.items()}
    return Rule(
        models=tuple(dict.fromkeys(p for m in models for p in m)) if models else None,
        model=chosen[0] if chosen else None,
        tokens_per_day=tokens["tokens_per_day"], tokens_per_month=tokens["tokens_per_month"],
        usd_per_day=budgets["usd_per_day"], usd_per_month=budgets["usd_per_month"],
        approval_minimum=min(approvals, key=APPROVALS.index) if approvals else None,
        boxed=all(boxed) if boxed else None)


def read_policy(data: object) -> Policy:
    """Read the admin's policy (a dict as in the module's docstring), or raise PolicyError."""
    if data is None:
        return Policy()
    if not isinstance(data, Mapping):
        raise PolicyError(f"The jupyter-ci policy must be a dict with {', '.join(SECTIONS)}; "
                          f"got {type(data).__name__}.")
    unknown = [k for k in data if k not in SECTIONS]
    if unknown:
        raise PolicyError(f"The jupyter-ci policy has no section {unknown[0]!r}; its sections "
                          f"are {', '.join(SECTIONS)}.")
    return Policy(read_rule(data.get("default") or {}, "default"),
                  _named(data.get("groups"), "groups"), _named(data.get("users"), "users"))


def _named(data: object, section: str) -> dict[str, Rule]:
    if data is None:
        return {}
    if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
        raise PolicyError(f"The jupyter-ci policy's {section!r} must map names to rules.")
    return {name: read_rule(rule, f"{section}[{name!r}]") for name, rule in data.items()}


def read_rule(data: object, where: str) -> Rule:
    """Read one entry, naming `where` it is in what it says is wrong."""
    if not isinstance(data, Mapping):
        raise PolicyError(f"The jupyter-ci policy's {where} must be a dict of rules.")
    known = [f.name for f in fields(Rule)]
    for name in data:
        if name not in known:
            raise PolicyError(f"The jupyter-ci policy's {where} has no rule {name!r}; the "
                              f"rules are {', '.join(known)}.")
    values: dict[str, object] = {}
    for name, value in data.items():
        values[name] = None if value is None else _value(name, value, f"{where}.{name}")
    return Rule(**values)  # type: ignore[arg-type]  # each checked by _value


def _value(name: str, value: object, where: str) -> object:
    """Check one rule's value, naming it (`where`) when it is wrong."""
    if name == "models":
        if isinstance(value, str) or not isinstance(value, Iterable) or not all(
                isinstance(m, str) and m.strip() for m in value):
            raise PolicyError(f"{where} must be a list of model ids or patterns such as "
                              "'openai:gpt-5-mini' or 'anthropic:*'.")
        return tuple(m.strip() for m in value)
    if name == "model":
        if not isinstance(value, str) or ":" not in value:
            raise PolicyError(f"{where} must be a model id, provider:model.")
        return value.strip()
    if name == "approval_minimum":
        if value not in APPROVALS:
            raise PolicyError(f"{where} must be one of {', '.join(APPROVALS)}.")
        return value
    if name == "boxed":
        if not isinstance(value, bool):
            raise PolicyError(f"{where} must be True or False.")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PolicyError(f"{where} must be a number, 0 or more (0: unlimited).")
    if name.startswith("tokens") and value != int(value):
        raise PolicyError(f"{where} must be a whole number of tokens.")
    return int(value) if name.startswith("tokens") else float(value)
