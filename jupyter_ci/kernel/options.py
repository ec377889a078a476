"""Parse `%%ask` options: leading flags, then the prompt as the user wrote it."""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass

from IPython.core.error import UsageError

from jupyter_ci.config import JupyterCI

#: What follows the options: the prompt, on the magic's line and/or in the cell below it.
PROMPT = "<what you want>"


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
    show_context: bool = False
    dry_run: bool = False
    #: Written by the labextension once the ask is answered (see record.pin_of).
    pin: str | None = None
    #: never, first, plan or each; None: the approval setting.
    approve: str | None = None


class _Formatter(argparse.HelpFormatter):
    # A fixed width: the usage line must not depend on the terminal (README quotes it).
    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=100, max_help_position=26)


def usage_error(message: str) -> UsageError:
    """Build the UsageError the magic raises: what is wrong, then the usage line."""
    return UsageError(f"%%ask: {message}\nUsage: {USAGE}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise usage_error(message)


def _default(name: str) -> str:
    return f"{getattr(JupyterCI, name).default_value:g}"


@functools.cache  # argparse's set-up costs milliseconds (gettext); a parser is reusable
def ask_parser() -> argparse.ArgumentParser:
    """Return the parser of the magic's options: the one source of its usage and help."""
    parser = _Parser(prog="%%ask", add_help=False, formatter_class=_Formatter)
    parser.add_argument("-m", "--model", metavar="MODEL",
                        help="provider:model, e.g. openai:gpt-5.5 or anthropic:claude-sonnet-5-5, "
                        "or replay:<recording file or folder> "
                        "(default: c.JupyterCI.model, else JUPYTER_CI_MODEL, else the "
                        "provider whose key is set)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="seconds one code run may take before it is interrupted; the "
                        f"kernel lives (default {_default('timeout')})")
    parser.add_argument("--max-steps", type=int, metavar="N",
                        help=f"code runs in this ask (default {_default('max_steps')})")
    parser.add_argument("--max-fixes", type=int, metavar="N",
                        help="consecutive failed runs before the ask gives up "
                        f"(default {_default('max_fixes')})")
    parser.add_argument("--approve", choices=("never", "first", "plan", "each"),
                        metavar="MODE",
                        help="when code waits for you: never, first (step), plan (approve a "
                        "plan first) or each (step) (default: the approval setting)")
    parser.add_argument("--new", action="store_true",
                        help="forget the earlier asks of this kernel")
    parser.add_argument("--refresh", action="store_true",
                        help="ask again even if this cell's earlier answer could be reused")
    parser.add_argument("--show-context", action="store_true",
                        help="show what the model was sent, after redaction (system prompt, "
                        "kernel context, messages), with estimated tokens per part")
    parser.add_argument("--dry-run", action="store_true",
                        help="show what would be sent, as --show-context, without calling "
                        "the model; nothing runs")
    # Written by the extension, not typed: kept out of the usage line (the README says what
    # it does). Headless runs (nbconvert, papermill, nbclient) then do not ask again.
    parser.add_argument("--pin", metavar="PIN", help=argparse.SUPPRESS)
    return parser


def _usage(parser: argparse.ArgumentParser) -> str:
    # One line, however argparse wraps it: messages and the README quote it whole.
    return f"{' '.join(parser.format_usage().removeprefix('usage: ').split())} {PROMPT}"


#: One line: `%%ask [-m MODEL] [--timeout SECONDS] ... <what you want>`.
USAGE = _usage(ask_parser())
# Options followed by a value: split_line must know them to find where the prompt begins.
_TAKES_VALUE = {flag for action in ask_parser()._actions if action.nargs != 0
                for flag in action.option_strings}


def help_text() -> str:
    """Return the magic's help (`%%ask?`): a summary, the usage line, each option's help."""
    parser = ask_parser()
    options = parser.format_help().partition("\n\n")[2].rstrip()
    return (f"Ask the model to do something with code run in this kernel.\n\n"
            f"Usage: {USAGE}\n\n"
            f"The prompt follows the options on the same line, in the cell below, or both; "
            f"`--` ends the options.\n\n{options}\n")


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
    args = ask_parser().parse_args(tokens)
    prompt = "\n".join(part for part in (rest, (cell or "").strip()) if part).strip()
    if not prompt:
        raise usage_error("write what you want after the magic.")
    for name, value in (("--timeout", args.timeout), ("--max-steps", args.max_steps),
                        ("--max-fixes", args.max_fixes)):
        if value is not None and value <= 0:
            raise usage_error(f"{name} must be a positive number, got {value:g}.")
    return AskOptions(prompt, args.model, args.timeout, args.max_steps, args.max_fixes,
                      args.new, args.refresh, args.show_context, args.dry_run, args.pin,
                      args.approve)
