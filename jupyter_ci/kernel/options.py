"""Parse `%%ask` options: leading flags, then the prompt as the user wrote it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from IPython.core.error import UsageError

USAGE = "%%ask [-m MODEL] [--timeout SECONDS] [--max-steps N] [--max-fixes N] [--new] " \
    "[--refresh] <what you want>"
_TAKES_VALUE = {"-m", "--model", "--timeout", "--max-steps", "--max-fixes"}


@dataclass(frozen=True)
class AskOptions:
    """One ask's options as given; None means the setting's value."""

    prompt: str
    model: str | None = None
    timeout: float | None = None
    max_steps: int | None = None
    max_fixes: int | None = None
    new: bool = False
    refresh: bool = False


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"%%ask: {message}\nUsage: {USAGE}")


def _parser() -> _Parser:
    parser = _Parser(prog="%%ask", add_help=False)
    parser.add_argument("-m", "--model")
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--max-fixes", type=int)
    parser.add_argument("--new", action="store_true")
    parser.add_argument("--refresh", action="store_true")
    return parser


def split_line(line: str) -> tuple[list[str], str]:
    """Split leading option tokens from the prompt, which is kept verbatim; `--` ends options."""
    tokens: list[str] = []
    rest = line.strip()
    expect_value = False
    while rest and (expect_value or rest.startswith("-")):
        token, _, rest = rest.partition(" ") if " " in rest else (rest, "", "")
        rest = rest.lstrip()
        if token == "--" and not expect_value:
            break
        tokens.append(token)
        expect_value = not expect_value and token in _TAKES_VALUE
    return tokens, rest


def parse_options(line: str, cell: str | None) -> AskOptions:
    """Parse the magic's line (and body) or raise UsageError saying what is wrong."""
    tokens, rest = split_line(line)
    args = _parser().parse_args(tokens)
    prompt = "\n".join(part for part in (rest, (cell or "").strip()) if part).strip()
    if not prompt:
        raise UsageError(f"%%ask: write what you want after the magic.\nUsage: {USAGE}")
    for name, value in (("--timeout", args.timeout), ("--max-steps", args.max_steps),
                        ("--max-fixes", args.max_fixes)):
        if value is not None and value <= 0:
            raise UsageError(f"%%ask: {name} must be a positive number, got {value:g}.")
    return AskOptions(prompt, args.model, args.timeout, args.max_steps, args.max_fixes,
                      args.new, args.refresh)
