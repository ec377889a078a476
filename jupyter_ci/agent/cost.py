"""What an ask's model calls cost: a price table per model, and the sums of one ask.

Token counts mean the same for every provider: `input_tokens` counts every prompt token
the provider billed, the ones it read from its prompt cache included, and `cached_tokens`
says how many of those were cache reads (OpenAI's `prompt_tokens_details.cached_tokens`,
Anthropic's `cache_read_input_tokens`, which Anthropic leaves out of its own input count).
A cache read costs `cached_input` per token instead of `input`. Anthropic's cache writes
are priced as input (they cost 1.25 times that; jupyter-ci asks for none).

Prices are USD per million tokens, looked up by the longest key that starts the model's
`provider:model` id, without regard to case or the spaces around either part (a variant a
provider takes for the same model is priced as that model); `c.JupyterCI.prices` entries
come first and may leave the provider out (`gpt-4.1` then prices that name under any
provider). Models no entry covers (Ollama and other local servers, replays, the scripted
double) are unpriced: their cost is None, and the server's model service refuses them while
a money budget is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jupyter_ci.agent.types import ModelReply
from jupyter_ci.wire.frozen import frozen

#: Prices are per this many tokens.
PER_TOKENS = 1_000_000
#: The fields of a price entry.
FIELDS = ("input", "output", "cached_input", "context_window")
#: An entry as `c.JupyterCI.prices` takes it, for messages.
EXAMPLE = ('{"input": 2.0, "output": 8.0, "cached_input": 0.5, "context_window": 1047576} '
           "(USD per million tokens; cached_input and context_window may be left out)")


class PriceError(ValueError):
    """A price entry that cannot be used; the message names it and says what is wrong."""


@frozen
class Rates:
    """One model's prices in USD per million tokens, and its context window in tokens."""

    input: float
    output: float
    #: A prompt token read from the provider's cache; None: the same as `input`.
    cached_input: float | None = None
    context_window: int | None = None

    def cost(self, reply: ModelReply) -> float:
        """Return what one turn cost in USD."""
        cached = min(max(reply.cached_tokens, 0), reply.input_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return ((reply.input_tokens - cached) * self.input + cached * cached_rate
                + reply.output_tokens * self.output) / PER_TOKENS


def _family(input: float, cached: float | None, output: float, window: int) -> Rates:
    return Rates(input, output, cached, window)


_GPT5, _GPT41, _O, _CLAUDE = 400_000, 1_047_576, 200_000, 200_000
#: The providers' list prices when this table was written. A key ending in "-" or "."
#: prices the newer models of its family as its newest listed one, until they are listed.
DEFAULT_PRICES: dict[str, Rates] = {
    "openai:gpt-5": _family(1.25, 0.125, 10.0, _GPT5),
    "openai:gpt-5-mini": _family(0.25, 0.025, 2.0, _GPT5),
    "openai:gpt-5-nano": _family(0.05, 0.005, 0.40, _GPT5),
    "openai:gpt-5-pro": _family(15.0, None, 120.0, _GPT5),
    "openai:gpt-5.1": _family(1.25, 0.125, 10.0, _GPT5),
    "openai:gpt-5.1-codex-mini": _family(0.25, 0.025, 2.0, _GPT5),
    "openai:gpt-5.2": _family(1.75, 0.175, 14.0, _GPT5),
    "openai:gpt-5.2-pro": _family(21.0, None, 168.0, _GPT5),
    "openai:gpt-5.": _family(1.75, 0.175, 14.0, _GPT5),
    "openai:gpt-4.1": _family(2.0, 0.5, 8.0, _GPT41),
    "openai:gpt-4.1-mini": _family(0.40, 0.10, 1.60, _GPT41),
    "openai:gpt-4.1-nano": _family(0.10, 0.025, 0.40, _GPT41),
    "openai:gpt-4o": _family(2.50, 1.25, 10.0, 128_000),
    "openai:gpt-4o-2024-05-13": _family(5.0, None, 15.0, 128_000),
    "openai:gpt-4o-mini": _family(0.15, 0.075, 0.60, 128_000),
    "openai:o1": _family(15.0, 7.50, 60.0, _O),
    "openai:o1-mini": _family(1.10, 0.55, 4.40, 128_000),
    "openai:o1-pro": _family(150.0, None, 600.0, _O),
    "openai:o3": _family(2.0, 0.50, 8.0, _O),
    "openai:o3-mini": _family(1.10, 0.55, 4.40, _O),
    "openai:o3-pro": _family(20.0, None, 80.0, _O),
    "openai:o4-mini": _family(1.10, 0.275, 4.40, _O),
    "anthropic:claude-opus-4": _family(15.0, 1.50, 75.0, _CLAUDE),
    "anthropic:claude-opus-4-0": _family(15.0, 1.50, 75.0, _CLAUDE),
    "anthropic:claude-opus-4-1": _family(15.0, 1.50, 75.0, _CLAUDE),
    "anthropic:claude-opus-4-2025": _family(15.0, 1.50, 75.0, _CLAUDE),  # 4.0's snapshot
    "anthropic:claude-opus-4-5": _family(5.0, 0.50, 25.0, _CLAUDE),
    "anthropic:claude-opus-4-": _family(5.0, 0.50, 25.0, _CLAUDE),
    "anthropic:claude-opus-": _family(5.0, 0.50, 25.0, _CLAUDE),
    "anthropic:claude-sonnet-": _family(3.0, 0.30, 15.0, _CLAUDE),
    "anthropic:claude-3-7-sonnet": _family(3.0, 0.30, 15.0, _CLAUDE),
    "anthropic:claude-haiku-4-5": _family(1.0, 0.10, 5.0, _CLAUDE),
    "anthropic:claude-haiku-": _family(1.0, 0.10, 5.0, _CLAUDE),
    "anthropic:claude-3-5-haiku": _family(0.80, 0.08, 4.0, _CLAUDE),
}


def parse_prices(raw: Mapping[str, object]) -> dict[str, Rates]:
    """Check `c.JupyterCI.prices` and return its rates; raise PriceError naming a bad entry."""
    return {_key(key): _rates(key, entry) for key, entry in raw.items()}


def _key(key: object) -> str:
    if not isinstance(key, str) or not key.strip():
        raise PriceError(f"c.JupyterCI.prices: {key!r} is not a model id or prefix; keys "
                         "are strings such as 'openai:gpt-4.1' or 'gpt-4.1'.")
    return key.strip()


def _rates(key: str, entry: object) -> Rates:
    """Build one entry's rates, or say what is wrong with it."""
    where = f"c.JupyterCI.prices[{key!r}]"
    if not isinstance(entry, Mapping):
        raise PriceError(f"{where} must be a dict such as {EXAMPLE}, not {entry!r}.")
    unknown = sorted(str(name) for name in entry if name not in FIELDS)
    if unknown:
        raise PriceError(f"{where} has unknown field(s) {', '.join(unknown)}; the fields are "
                         f"{', '.join(FIELDS)}, e.g. {EXAMPLE}.")
    for name in ("input", "output"):
        if name not in entry:
            raise PriceError(f"{where} needs {name!r}, e.g. {EXAMPLE}.")
    window = entry.get("context_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window <= 0):
        raise PriceError(f"{where}['context_window'] must be a whole number of tokens "
                         f"above 0, not {window!r}.")
    cached = entry.get("cached_input")
    return Rates(_usd(where, "input", entry["input"]), _usd(where, "output", entry["output"]),
                 None if cached is None else _usd(where, "cached_input", cached), window)


def _usd(where: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise PriceError(f"{where}[{name!r}] must be a number of USD per million tokens, "
                         f"0 or more, not {value!r}.")
    return float(value)


@frozen
class PriceTable:
    """The prices a door uses: the user's entries first, then the defaults."""

    own: Mapping[str, Rates] = field(default_factory=dict)
    defaults: Mapping[str, Rates] = field(default_factory=lambda: DEFAULT_PRICES)

    def rates(self, model_id: str) -> Rates | None:
        """Return the rates of `provider:model`, or None when no entry covers it."""
        provider, sep, name = model_id.partition(":")
        name = name.strip().lower() if sep else provider.strip().lower()
        model_id = f"{provider.strip().lower()}:{name}" if sep else name
        return _longest(self.own, model_id, name) or _longest(self.defaults, model_id, None)

    def meter(self, model_id: str) -> Meter:
        """Return a new ask's meter for `model_id` (what a door gives the driver as `price`)."""
        return Meter(self.rates(model_id))


def _longest(table: Mapping[str, Rates], model_id: str, name: str | None) -> Rates | None:
    """Find the entry of the longest key starting the id (or, without a provider, the name)."""
    keys = [k for k in table
            if model_id.startswith(k.lower()) or (name is not None and ":" not in k
                                                  and name.startswith(k.lower()))]
    return table[max(keys, key=len)] if keys else None


def price_table(prices: Mapping[str, object] | None = None) -> PriceTable:
    """Return the defaults overridden by `c.JupyterCI.prices` (raises PriceError)."""
    return PriceTable(parse_prices(prices or {}))


@frozen
class AskUsage:
    """What one ask used over all its model calls, and what that cost (None: unpriced)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None

    def to_json(self) -> dict[str, int | float | None]:
        """Return the `usage` of an outcome's JSON form."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cached_tokens": self.cached_tokens, "cost_usd": usd(self.cost_usd)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> AskUsage:
        """Read a `usage` back (a REST result's), taking what is missing or odd as none."""
        def count(name: str) -> int:
            value = data.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        cost = data.get("cost_usd")
        return cls(count("input_tokens"), count("output_tokens"), count("cached_tokens"),
                   float(cost) if isinstance(cost, int | float) and
                   not isinstance(cost, bool) else None)

    def line(self) -> str:
        """Say it in one line, "Tokens: 12,345 in (2,000 cached) · 678 out · $0.0123"."""
        if not (self.input_tokens or self.output_tokens):
            return ""  # no model call, or a replay: nothing was spent
        cached = f" ({self.cached_tokens:,} cached)" if self.cached_tokens else ""
        said = f"Tokens: {self.input_tokens:,} in{cached} · {self.output_tokens:,} out"
        return said if self.cost_usd is None else f"{said} · {dollars(self.cost_usd)}"


def usd(amount: float | None) -> float | None:
    """Round an amount for JSON (float sums carry noise far below a cent)."""
    return None if amount is None else round(amount, 8)


def dollars(amount: float) -> str:
    """Show an amount of USD: cents above a dollar, four decimals below."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


@dataclass
class Meter:
    """Price each model turn of one ask and keep the ask's sums.

    A door makes one per ask (`PriceTable.meter`) and gives it to the driver as its
    `price`; the driver calls it once per reply; the door reads `usage()` for the outcome.
    """

    rates: Rates | None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None

    @property
    def context_window(self) -> int | None:
        """Return the model's context window in tokens, when its price entry gives it."""
        return None if self.rates is None else self.rates.context_window

    def __call__(self, reply: ModelReply) -> float | None:
        """Count one reply; return its cost in USD, or None when the model is unpriced."""
        self.input_tokens += reply.input_tokens
        self.output_tokens += reply.output_tokens
        self.cached_tokens += reply.cached_tokens
        # Priced by the model service that made the call (and charged it): summed as told.
        cost = reply.cost_usd
        if cost is None and self.rates is not None:
            cost = self.rates.cost(reply)  # a call this process made itself
        if cost is None:
            return None
        self.cost_usd = (self.cost_usd or 0.0) + cost
        return cost

    def usage(self) -> AskUsage:
        """Return the ask's sums so far."""
        return AskUsage(self.input_tokens, self.output_tokens, self.cached_tokens,
                        self.cost_usd)
