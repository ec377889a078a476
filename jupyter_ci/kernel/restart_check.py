"""Would the notebook still run after a restart? A static look at the cells, in order.

An ask's steps run in the live kernel, where names made by cells that no longer exist (the
generated cells a re-ask replaced, a deleted cell) still live. The notebook then works until
the kernel restarts. The labextension sends the code cells above an `%%ask` cell; from them:

- `kernel_only`: names in the kernel that no cell above defines (the model is told);
- `restart_problems`: names a step reads that neither a cell above nor an earlier step
  (nor the step itself) defines, i.e. what Run All after a restart would raise NameError on;
  `restart_check` puts it in the form the ask loop runs before it calls an ask done.

Run All sends every request at once, so the cells above an ask were read before the asks
above it placed their steps: `up_to_date` adds the steps this kernel has run for those asks
since (see docs/protocol.md, `asks_above`).

No code is run. The names a piece of code binds are found with `ast` after IPython's own
transforms (magics, `!cmd`); the look is deliberately coarse: a name bound anywhere in a
piece of code counts as defined by it, and `from x import *` makes the answer unknown.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_ci.agent.restart import RestartCheck, RestartProblem

#: Names every IPython namespace has without any cell defining them.
_IPYTHON_NAMES = frozenset({"get_ipython", "display", "In", "Out", "exit", "quit"})


@dataclass(frozen=True)
class Names:
    """What one piece of code binds and reads; `star` when it does `from x import *`."""

    bound: frozenset[str]
    read: tuple[str, ...]
    star: bool = False


def names_of(code: str, transform: Callable[[str], str] = lambda c: c) -> Names | None:
    """Return what `code` binds and reads, or None when it cannot be parsed."""
    tree = _parse(code, transform)
    return None if tree is None else _names(tree)


def statements_of(code: str, transform: Callable[[str], str] = lambda c: c
                  ) -> list[Names] | None:
    """Return the names of each top-level statement in order, or None when unparsable.

    An assignment reads its value before it binds its targets: `orders = orders.dropna()`
    reads an `orders` that must come from before.
    """
    tree = _parse(code, transform)
    if tree is None:
        return None
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign) and stmt.value:
            value = _names(stmt.value)
            targets = _names(ast.Module(body=[stmt], type_ignores=[]))
            extra = [stmt.target] if isinstance(stmt, ast.AugAssign) else []
            read = value.read + tuple(n.id for n in extra if isinstance(n, ast.Name))
            found.append(Names(value.bound, read))
            found.append(Names(targets.bound, ()))
        else:
            found.append(_names(stmt))
    return found


#: Cell magics whose body is Python run in the user's namespace.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})


def _parse(code: str, transform: Callable[[str], str]) -> ast.Module | None:
    first, _, body = code.lstrip().partition("\n")
    if first.startswith("%%") and first[2:].split(" ")[0] in _PYTHON_CELL_MAGICS:
        code = body  # transform would hide the body in a string: look inside
    try:
        return ast.parse(transform(code))
    except (SyntaxError, ValueError):
        return None


def _names(tree: ast.AST) -> Names:
    bound: set[str] = set()
    read: list[str] = []
    star = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                read.append(node.id)
            else:
                bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    star = True
                else:
                    bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
    return Names(frozenset(bound), tuple(dict.fromkeys(read)), star)


def _always(extra: Iterable[str]) -> frozenset[str]:
    return frozenset(dir(builtins)) | _IPYTHON_NAMES | frozenset(extra)


def defined_above(above: Sequence[str], transform: Callable[[str], str]
                  ) -> frozenset[str] | None:
    """Return the names the cells above bind; None when one cannot be read or star-imports."""
    names: set[str] = set()
    for source in above:
        found = names_of(source, transform)
        if found is None or found.star:
            return None
        names |= found.bound
    return frozenset(names)


def kernel_only(namespace: Iterable[str], above: frozenset[str], hidden: Iterable[str] = ()
                ) -> list[str]:
    """Return the user's names in the kernel that no cell above defines, sorted."""
    skip = _always(hidden)
    return sorted(n for n in namespace if not n.startswith("_") and n not in skip
                  and n not in above)


def restart_problems(above: frozenset[str], steps: Sequence[tuple[int, str]],
                     transform: Callable[[str], str], hidden: Iterable[str] = ()
                     ) -> list[tuple[int, list[str]]]:
    """Return, per step, the names it reads that nothing before it (or itself) defines."""
    known = set(above) | _always(hidden)
    problems: list[tuple[int, list[str]]] = []
    for step, code in steps:
        statements = statements_of(code, transform)
        if statements is None:
            return problems  # from here on the names are not known
        missing: list[str] = []
        for names in statements:
            if names.star:
                return problems
            # Within one statement (a loop, a def), a name it binds counts as defined.
            missing += [n for n in names.read if n not in known and n not in names.bound
                        and n not in missing]
            known |= names.bound
        if missing:
            problems.append((step, missing))
    return problems


def restart_check(above: frozenset[str], transform: Callable[[str], str],
                  hidden: Iterable[str] = ()) -> RestartCheck:
    """Return the loop's check: which kept steps would fail after a restart, and why."""
    hidden = frozenset(hidden)

    def check(steps: Sequence[tuple[int, str]], failed: Sequence[str]
              ) -> list[RestartProblem]:
        made = set().union(*(found.bound for code in failed
                             if (found := names_of(code, transform)) is not None))
        return [RestartProblem(step, tuple(names), tuple(n for n in names if n in made))
                for step, names in restart_problems(above, steps, transform, hidden)]

    return check


@dataclass(frozen=True)
class AskAbove:
    """An ask cell above the running ask, as the browser saw it when it sent the request."""

    cell_id: str
    #: The ask its record named then (None: none yet).
    ask_id: str | None
    #: Where its generated cells are in the sources sent as `above`.
    cells: tuple[int, ...] = ()


@dataclass(frozen=True)
class RanAsk:
    """An ask this kernel ran from an ask cell: its id and the code its cells hold."""

    ask_id: str
    codes: tuple[str, ...]


def asks_above(raw: Any) -> list[AskAbove]:
    """Read `asks_above` from a request (docs/protocol.md); anything malformed is left out."""
    found = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("cell_id"), str):
            continue
        ask_id, cells = item.get("ask_id"), item.get("cells")
        indices = tuple(i for i in cells if isinstance(i, int) and not isinstance(i, bool)
                        ) if isinstance(cells, list) else ()
        found.append(AskAbove(item["cell_id"], ask_id if isinstance(ask_id, str) else None,
                              indices))
    return found


def up_to_date(above: Sequence[str], asks: Sequence[AskAbove], ran: Mapping[str, RanAsk]
               ) -> list[str]:
    """Return the sources above as they are now: with the steps asks above ran since."""
    # An ask cell whose record names another ask than the kernel's last one from that cell
    # was (re-)asked after the browser read the notebook: its cells then are gone, its
    # kernel's steps are there now.
    stale: set[int] = set()
    added: list[str] = []
    for ask in asks:
        kept = ran.get(ask.cell_id)
        if kept is not None and kept.ask_id != ask.ask_id:
            stale.update(ask.cells)
            added.extend(kept.codes)
    return [source for i, source in enumerate(above) if i not in stale] + added


def restart_notice(problems: Sequence[tuple[int, list[str]]]) -> str:
    """Say what Run All after a restart would raise, in one sentence per step."""
    lines = []
    for step, names in problems:
        shown = ", ".join(f"`{n}`" for n in names[:5]) + (" …" if len(names) > 5 else "")
        verb = "is" if len(names) == 1 else "are"
        lines.append(f"After a restart, step {step} would fail: {shown} {verb} defined by no "
                     "cell above it.")
    return " ".join(lines)
