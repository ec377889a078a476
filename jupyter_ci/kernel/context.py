"""Describe the live kernel for the model: variables, last error, recent inputs, files, versions."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import linecache
import os
import platform
import re
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from jupyter_ci.agent.budget import fit_sections, trim_middle
from jupyter_ci.agent.secrets import redact
from jupyter_ci.kernel.previews import human_size, previews_section
from jupyter_ci.kernel.variables import LINE_CHARS, describe_variable, is_data

_DESCRIBE_SECONDS = 0.03  # past this, variables are listed by name and type only
_MAX_INPUTS = 10
_INPUT_CHARS = 1_500
_MAX_FILES = 50
_FILES_PER_FOLDER = 10
_SCAN_ENTRIES = 1_000  # never read more of one directory than this
_ALWAYS_HIDDEN = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_SKIP_DIRS = frozenset({"__pycache__", "node_modules"})
#: Importable name -> distribution name, for the libraries a data task is likely to want.
LIBRARIES = {
    "pandas": "pandas", "numpy": "numpy", "matplotlib": "matplotlib", "seaborn": "seaborn",
    "scipy": "scipy", "sklearn": "scikit-learn", "polars": "polars", "plotly": "plotly",
    "statsmodels": "statsmodels",
}
_version_cache: dict[tuple[str, str], str] = {}


def collect_context(shell: InteractiveShell, budget_tokens: int, *, cwd: str | None = None,
                    prompt: str = "") -> str:
    """Describe the kernel in plain text of about budget_tokens, most useful sections first."""
    folder = cwd if cwd is not None else _working_folder()
    sections = [
        # What the user pointed at comes first; each preview is capped (previews.py).
        ("Data files the prompt names", _safely(lambda _: previews_section(prompt, folder),
                                                None)),
        ("Variables", _safely(_variables_section, shell)),
        ("Last error", _safely(_last_error_section, shell)),
        ("Recent inputs, oldest first", _safely(_inputs_section, shell)),
        # Named relative to the notebook: the model needs no absolute (home) path.
        ("Files in the working directory (the notebook's folder)",
         _safely(_files_section, folder)),
        ("Environment", _safely(environment_section, None)),
    ]
    return fit_sections(sections, budget_tokens)


def _working_folder() -> str:
    """Give the kernel's working folder, or "." when it was deleted under the kernel."""
    try:
        return os.getcwd()
    except OSError:
        return "."


def _safely(build: Callable[[Any], str], arg: Any) -> str:
    """Build one section; a failure costs that section only, never the ask."""
    try:
        return build(arg)
    except Exception as exc:
        return f"(unavailable: {type(exc).__name__})"


@dataclass(frozen=True)
class _Namespace:
    """The user's own variables, split from the modules they imported."""

    variables: list[tuple[str, Any]]
    modules: list[str]


def _user_namespace(shell: InteractiveShell) -> _Namespace:
    """Separate the user's variables from IPython's own names and from imports."""
    hidden = shell.user_ns_hidden
    main = shell.user_ns.get("__name__", "__main__")
    missing = object()
    variables: list[tuple[str, Any]] = []
    modules: list[str] = []
    for name, value in list(shell.user_ns.items()):
        # A hidden name the user rebinds is theirs again (the rule %who follows).
        if name.startswith("_") or name in _ALWAYS_HIDDEN or hidden.get(name, missing) is value:
            continue
        if isinstance(value, types.ModuleType):
            module = getattr(value, "__name__", name)
            modules.append(name if module == name else f"{name} = {module}")
        elif not _is_imported(value, main):
            variables.append((name, value))
    variables.sort(key=lambda item: _rank(item[1]))
    return _Namespace(variables, modules)


def _is_imported(value: Any, main: str) -> bool:
    """Tell functions, classes and typing helpers imported from modules from the user's own."""
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return getattr(value, "__module__", None) != main
    return type(value).__module__ in ("typing", "typing_extensions")


def _rank(value: Any) -> int:
    """Order data first, then other values, then the user's functions and classes."""
    try:
        if isinstance(value, (type, types.FunctionType)):
            return 2
        return 0 if is_data(value) else 1
    except Exception:  # an object whose __class__ raises still gets listed
        return 1


def _variables_section(shell: InteractiveShell) -> str:
    """List each user variable with its type and a cheap, redacted summary."""
    namespace = _user_namespace(shell)
    lines = [f"modules: {', '.join(namespace.modules)}"] if namespace.modules else []
    deadline = time.perf_counter() + _DESCRIBE_SECONDS
    for name, value in namespace.variables:
        lines.append(describe_variable(name, value, detailed=time.perf_counter() < deadline))
    return "\n".join(lines)


def _last_error_section(shell: InteractiveShell) -> str:
    """Name the kernel's last exception, the cell it came from and the failing line."""
    error = getattr(sys, "last_value", None)
    if not isinstance(error, BaseException):
        return ""
    text = f"{type(error).__name__}: {trim_middle(str(error), 500)}"
    # IPython 9 records which cells failed; older versions leave the cell unknown.
    failed = getattr(shell.history_manager, "exceptions", None)
    if failed:
        text = f"In [{max(failed)}]: {text}"
    line = _failing_line(shell, error)
    return redact(f"{text}\n  at: {line}" if line else text)


def _failing_line(shell: InteractiveShell, error: BaseException) -> str:
    """Find the innermost line of the user's own code in the error's traceback."""
    if isinstance(error, SyntaxError):
        return (error.text or "").strip()
    found = ""
    tb = error.__traceback__
    while tb is not None:
        # Frames whose globals are the user namespace run cell code or user functions.
        if tb.tb_frame.f_globals is shell.user_global_ns:
            code = tb.tb_frame.f_code
            found = linecache.getline(code.co_filename, tb.tb_lineno).strip()
        tb = tb.tb_next
    return found[:LINE_CHARS]


def _inputs_section(shell: InteractiveShell) -> str:
    """Show the last inputs run, marking asks; the newest, if an ask, is the current one."""
    history = getattr(shell.history_manager, "input_hist_raw", None)
    raw: list[str] = list(history if history is not None else shell.user_ns.get("In", []))
    entries = [(n, src.strip("\n")) for n, src in enumerate(raw) if src.strip()]
    if entries and _is_ask(entries[-1][1]):
        entries.pop()  # the ask being answered; its prompt is sent on its own
    blocks = []
    for number, source in entries[-_MAX_INPUTS:]:
        label = f"In [{number}]" + (" (an earlier ask)" if _is_ask(source) else "")
        blocks.append(f"{label}:\n{trim_middle(source, _INPUT_CHARS)}")
    return redact("\n".join(blocks))


def _is_ask(source: str) -> bool:
    """Tell an %ask or %%ask input."""
    first = source.lstrip().split(None, 1)[0] if source.strip() else ""
    return first in ("%ask", "%%ask")


def _files_section(folder: str) -> str:
    """List a folder's files with sizes, and the first entries of each subfolder."""
    entries = _scan(folder)
    lines: list[str] = []
    for index, entry in enumerate(entries):
        if len(lines) >= _MAX_FILES:
            more = len(entries) - index
            lines.append(f"… {more:,}{'+' * (len(entries) >= _SCAN_ENTRIES)} more entries")
            break
        if not _is_dir(entry):
            lines.append(f"{entry.name} ({_size(entry)})")
            continue
        inner = _scan(entry.path)
        count = f"{len(inner):,}{'+' * (len(inner) >= _SCAN_ENTRIES)}"
        lines.append(f"{entry.name}/ ({count} entries)")
        lines.extend(f"  {e.name}/" if _is_dir(e) else f"  {e.name} ({_size(e)})"
                     for e in inner[:_FILES_PER_FOLDER])
    return "\n".join(lines)


def _scan(folder: str) -> list[os.DirEntry[str]]:
    """Read at most _SCAN_ENTRIES visible entries of a folder: files first, then by name."""
    try:
        with os.scandir(folder) as it:
            entries = [e for e in islice(it, _SCAN_ENTRIES)
                       if not e.name.startswith(".") and e.name not in _SKIP_DIRS]
    except OSError:
        return []
    return sorted(entries, key=lambda e: (_is_dir(e), e.name.lower()))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """Tell a folder, treating an unreadable entry as a file."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _size(entry: os.DirEntry[str]) -> str:
    """Give a file's size in human units."""
    try:
        return human_size(entry.stat().st_size)
    except OSError:
        return "unreadable"


def environment_section(_: object = None) -> str:
    """Give the Python version, the platform and which data libraries are installed."""
    found, missing = [], []
    for module, dist in LIBRARIES.items():
        version = _library_version(module, dist)
        if version is None:
            missing.append(module)
        else:
            found.append(f"{module} {version}")
    lines = [f"Python {platform.python_version()} on {platform.system()} {platform.machine()}",
             f"installed: {', '.join(found) or 'none of the usual data libraries'}"]
    if missing:
        lines.append(f"not installed: {', '.join(missing)}")
    # Environment variables are deliberately left out: their values may hold credentials.
    return "\n".join(lines)


def _library_version(module: str, dist: str) -> str | None:
    """Give an importable library's version without importing it, or None."""
    loaded = sys.modules.get(module)
    if loaded is not None and isinstance(getattr(loaded, "__version__", None), str):
        return str(loaded.__version__)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    key = (dist, str(spec.origin))
    if key not in _version_cache:
        version = _dist_info_version(dist, spec) or _metadata_version(dist)
        _version_cache[key] = version or "(version unknown)"
    return _version_cache[key]


def _dist_info_version(dist: str, spec: importlib.machinery.ModuleSpec) -> str | None:
    """Read the version off the `name-version.dist-info` folder beside the package."""
    # importlib.metadata parses METADATA with the email package: ~30 ms on a cold kernel.
    if not spec.origin:
        return None
    package_dir = os.path.dirname(spec.origin)
    site = os.path.dirname(package_dir) if spec.submodule_search_locations else package_dir
    wanted = _normalise(dist)
    try:
        with os.scandir(site) as entries:
            for entry in entries:
                stem, dot, suffix = entry.name.rpartition(".")
                name, _, version = stem.rpartition("-")
                if dot and suffix == "dist-info" and _normalise(name) == wanted:
                    return version
    except OSError:
        return None
    return None


def _normalise(name: str) -> str:
    """Normalise a distribution name the way dist-info folder names are (PEP 503)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata_version(dist: str) -> str | None:
    """Ask importlib.metadata, the slow but thorough way (egg-info, editable installs)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
