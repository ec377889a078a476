"""Models their providers retire: when, and what to use instead (a note, never a refusal).

A copy of the SDKs' own tables (anthropic's `DEPRECATED_MODELS`, the deprecated values listed
under openai's `ChatModel`): reading them at run time means importing the SDK (seconds) or
parsing its source. tests/test_retiring.py holds this copy to the installed SDKs'.
"""

from __future__ import annotations

from datetime import date

from jupyter_ci import providers

_ANTHROPIC = {
    "2026-06-30": "claude-mythos-preview",
    "2026-11-30": "claude-sonnet-4-5 claude-sonnet-4-5-20250929",
    "2027-01-22": "claude-opus-4-5 claude-opus-4-5-20251101",
}
_OPENAI = {
    "2024-09-13": "gpt-3.5-turbo-16k gpt-3.5-turbo-0301 gpt-3.5-turbo-0613 "
                  "gpt-3.5-turbo-16k-0613",
    "2024-12-06": "gpt-4-vision-preview",
    "2025-06-06": "gpt-4-32k gpt-4-32k-0314 gpt-4-32k-0613",
    "2025-07-28": "o1-preview o1-preview-2024-09-12",
    "2025-10-10": "gpt-4o-audio-preview-2024-10-01",
    "2025-10-27": "o1-mini o1-mini-2024-09-12",
    "2026-02-12": "codex-mini-latest",
    "2026-02-17": "chatgpt-4o-latest",
    "2026-03-26": "gpt-4-0125-preview gpt-4-turbo-preview gpt-4-0314",
    "2026-05-07": "gpt-4o-audio-preview gpt-4o-audio-preview-2024-12-17 "
                  "gpt-4o-audio-preview-2025-06-03 gpt-4o-mini-audio-preview "
                  "gpt-4o-mini-audio-preview-2024-12-17",
    "2026-07-23": "gpt-5.1-codex gpt-5.1-chat-latest gpt-5-chat-latest gpt-4o-search-preview "
                  "gpt-4o-mini-search-preview gpt-4o-search-preview-2025-03-11 "
                  "gpt-4o-mini-search-preview-2025-03-11",
    "2026-08-10": "gpt-5.3-chat-latest gpt-5.2-chat-latest",
    "2026-09-28": "gpt-3.5-turbo-1106",
    "2026-10-23": "gpt-4.1-nano gpt-4.1-nano-2025-04-14 o4-mini o4-mini-2025-04-16 o3-mini "
                  "o3-mini-2025-01-31 o1 o1-2024-12-17 gpt-4o-2024-05-13 gpt-4-turbo "
                  "gpt-4-turbo-2024-04-09 gpt-4-1106-preview gpt-4 gpt-4-0613 gpt-3.5-turbo "
                  "gpt-3.5-turbo-0125",
    "2026-12-11": "gpt-5 gpt-5-mini gpt-5-nano gpt-5-2025-08-07 gpt-5-mini-2025-08-07 "
                  "gpt-5-nano-2025-08-07 o3 o3-2025-04-16",
    "2027-01-14": "gpt-4.1 gpt-4.1-mini gpt-4.1-2025-04-14 gpt-4.1-mini-2025-04-14 gpt-4o "
                  "gpt-4o-2024-11-20 gpt-4o-2024-08-06 gpt-4o-mini gpt-4o-mini-2024-07-18",
    "2027-01-20": "gpt-audio-mini gpt-audio-mini-2025-12-15",
    "2027-04-01": "gpt-5.4-nano gpt-5.4-nano-2026-03-17 gpt-5.1 gpt-5.1-2025-11-13",
}

#: provider -> model name -> the day its provider retires it (ISO date).
RETIRING: dict[str, dict[str, str]] = {
    provider: {name: day for day, names in table.items() for name in names.split()}
    for provider, table in (("anthropic", _ANTHROPIC), ("openai", _OPENAI))
}

#: provider -> (words in a retiring name, the current model to use instead), first match wins.
_SUCCESSORS = {
    "anthropic": (("opus", "claude-opus-5-5"), ("haiku", "claude-haiku-5-5"),
                  ("mythos", "claude-mythos-5-2"), ("", "claude-sonnet-5-5")),
    "openai": (("mini", "gpt-5.4-mini"), ("nano", "gpt-5.4-mini"), ("", "gpt-5.5")),
}


def successor(provider: str, name: str) -> str:
    """Name the current model that replaces a retiring one of `provider`."""
    return next(new for word, new in _SUCCESSORS.get(provider, ()) if word in name)


def note(model_id: str, today: date | None = None) -> str:
    """Say in one line that `model_id` is being retired and what to use; "" when it is not."""
    provider, _, name = model_id.partition(":")
    day = RETIRING.get(provider, {}).get(name)
    if day is None:
        return ""
    spec = providers.get(provider)
    label = spec.label if spec else provider
    past = date.fromisoformat(day) <= (today or date.today())
    new = f"{provider}:{successor(provider, name)}"
    return (f"{model_id} is deprecated: {label} {'retired' if past else 'retires'} it on "
            f"{day}. Use {new} instead (-m {new}).")
