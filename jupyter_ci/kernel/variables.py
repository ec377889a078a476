"""Summarise one Python value for the model cheaply, boundedly and without its secrets."""

from __future__ import annotations

import inspect
import reprlib
import sys
import types
from collections.abc import Iterable
from itertools import islice
from typing import Any

from jupyter_ci.agent.secrets import REDACTED, is_secret_name, redact

#: Longest line of a variable's description.
LINE_CHARS = 160
_HEAD_ROWS = 3
_HEAD_COLUMNS = 8
_MAX_COLUMNS = 30
_REDACT_WINDOW = 2_000  # characters of a long string scanned for secrets at each end


def describe_variable(name: str, value: Any, *, detailed: bool = True) -> str:
    """Describe a variable in a few lines; detailed=False gives only its name and type."""
    type_name = _type_name(value)
    if is_secret_name(name):
        return f"{name}: {type_name} = {REDACTED}"
    try:
        if isinstance(value, (type, types.FunctionType)):
            return redact(_describe_code(name, value))
        summary = _summary(value) if detailed else ""
    except Exception as exc:
        summary = f" (could not summarise: {type(exc).__name__})"
    lines = redact(f"{name}: {type_name}{summary}").split("\n")
    return "\n".join(line[:LINE_CHARS] for line in lines)


def _type_name(value: Any) -> str:
    """Name a value's type as package.Class, or Class for builtins and the user's own."""
    cls = type(value)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    if module in ("builtins", "__main__"):
        return str(name)
    return f"{module.split('.')[0]}.{name}"


def _describe_code(name: str, value: type | types.FunctionType) -> str:
    """Show a user-defined function's signature or a class's bases, with its first doc line."""
    if isinstance(value, type):
        bases = ", ".join(b.__name__ for b in value.__bases__ if b is not object)
        text = f"class {name}({bases})" if bases else f"class {name}"
    else:
        try:
            text = f"def {name}{inspect.signature(value)}"
        except (TypeError, ValueError):
            text = f"def {name}(...)"
    doc = (value.__doc__ or "").strip().split("\n", 1)[0]
    return (f'{text}  # {doc}' if doc else text)[:LINE_CHARS]


def _summary(value: Any) -> str:
    """Summarise a value by kind, touching only a bounded part of it."""
    if value is None or isinstance(value, (bool, int, float, complex)):
        return f" = {_SHORT.repr(value)}"
    if isinstance(value, (str, bytes, bytearray, list, tuple, set, frozenset, dict)):
        return f", len {len(value):,} = {_SHORT.repr(value)}"
    kind = _pandas_kind(value)
    if kind == "DataFrame":
        return _frame_summary(value)
    if kind == "Series":
        return _series_summary(value)
    if _numpy_array(value):
        preview = f" = {_SHORT.repr(value.tolist())}" if value.size <= 20 else ""
        return f", shape {value.shape}, dtype {value.dtype}{preview}"
    shape = _shape(value)
    if shape is not None:
        dtype = f", dtype {value.dtype}" if hasattr(type(value), "dtype") else ""
        return f", shape {shape}{dtype}"
    return f" = {_SHORT.repr(value)}"


def is_data(value: Any) -> bool:
    """Tell a pandas DataFrame or Series or a numpy array."""
    return _pandas_kind(value) is not None or _numpy_array(value)


def _pandas_kind(value: Any) -> str | None:
    """Say "DataFrame" or "Series" for real pandas objects, without importing pandas."""
    pandas = sys.modules.get("pandas")
    if pandas is None:
        return None
    if isinstance(value, pandas.DataFrame):
        return "DataFrame"
    return "Series" if isinstance(value, pandas.Series) else None


def _numpy_array(value: Any) -> bool:
    """Tell a numpy array, without importing numpy."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def _shape(value: Any) -> tuple[Any, ...] | None:
    """Give an array-like's shape (polars, torch, xarray...), or None for scalars and others."""
    # Look on the class so an instance __getattr__ (proxies, lazy loaders) is never triggered.
    if not hasattr(type(value), "shape"):
        return None
    shape = tuple(value.shape)
    return shape or None


def _frame_summary(frame: Any) -> str:
    """Give a DataFrame's shape, index, columns with dtypes and first rows."""
    rows, cols = frame.shape
    lines = [f", {rows:,} rows x {cols:,} columns"]
    if type(frame.index).__name__ != "RangeIndex":
        lines.append(f"  index: {type(frame.index).__name__} named {frame.index.name!r}")
    dtypes = frame.dtypes.iloc[:_MAX_COLUMNS]
    columns = [f"{c} ({t})" for c, t in zip(dtypes.index, dtypes, strict=True)]
    more = f", … {cols - _MAX_COLUMNS:,} more" if cols > _MAX_COLUMNS else ""
    lines.append(f"  columns: {', '.join(columns)}{more}")
    if rows and cols:
        head = frame.iloc[:_HEAD_ROWS, :_HEAD_COLUMNS].copy()
        for i, column in enumerate(head.columns):
            if _secret_label(column):
                head.isetitem(i, [REDACTED] * len(head))
        lines.append("  first rows:")
        lines.extend("    " + line for line in head.to_string(max_colwidth=30).split("\n"))
    return "\n".join(lines)


def _secret_label(label: Any) -> bool:
    """Tell a column or Series label that names a secret, at any level of a MultiIndex."""
    parts = label if isinstance(label, tuple) else (label,)
    return any(isinstance(part, str) and is_secret_name(part) for part in parts)


def _series_summary(series: Any) -> str:
    """Give a Series' length, dtype, name and first values."""
    text = f", length {len(series):,}, dtype {series.dtype}, name {series.name!r}"
    if _secret_label(series.name):
        return text + f", values {REDACTED}"
    head = series.iloc[:_HEAD_ROWS].to_string(max_rows=_HEAD_ROWS)
    return text + "\n" + "\n".join("    " + line for line in head.split("\n"))


class _ShortRepr(reprlib.Repr):
    """A reprlib.Repr that never sorts or fully renders big objects and redacts strings."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = 80
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdict = 6
        self.maxlevel = 3
        self.maxlong = 40

    def repr_str(self, x: str, level: int) -> str:
        """Redact before truncating, so a key cut in half cannot slip through."""
        if len(x) > 2 * _REDACT_WINDOW:
            x = redact(x[:_REDACT_WINDOW]) + redact(x[-_REDACT_WINDOW:])
        return super().repr_str(redact(x), level)

    def repr_int(self, x: int, level: int) -> str:
        """Describe huge ints by size; their full repr is slow or refused."""
        if x.bit_length() > 256:
            return f"<int of {x.bit_length():,} bits>"
        return super().repr_int(x, level)

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        """Show the first items in insertion order (reprlib sorts all keys first)."""
        if level <= 0 and x:
            return "{...}"
        pieces = [f"{self.repr1(k, level - 1)}: {self._value(k, v, level - 1)}"
                  for k, v in islice(x.items(), self.maxdict)]
        return "{" + ", ".join(pieces + ["..."] * (len(x) > self.maxdict)) + "}"

    def _value(self, key: Any, value: Any, level: int) -> str:
        """Hide the value of a secret-named key."""
        if isinstance(key, str) and is_secret_name(key):
            return REDACTED
        return self.repr1(value, level)

    def repr_tuple(self, x: tuple[Any, ...], level: int) -> str:
        """Hide the second item of a `("password", value)` pair."""
        if len(x) == 2 and isinstance(x[0], str) and is_secret_name(x[0]):
            return f"({self.repr1(x[0], level - 1)}, {REDACTED})"
        return super().repr_tuple(x, level)

    def repr_set(self, x: set[Any] | frozenset[Any], level: int) -> str:
        """Show the first members in iteration order (reprlib sorts them all first)."""
        name = type(x).__name__
        inner = self._members(x, level, "{", "}") if x else ""
        return inner if name == "set" and x else f"{name}({inner})"

    repr_frozenset = repr_set

    def _members(self, x: Iterable[Any], level: int, left: str, right: str) -> str:
        """Render up to maxset members between the given brackets."""
        items = [self.repr1(v, level - 1) for v in islice(x, self.maxset + 1)]
        shown = items[:self.maxset] + ["..."] * (len(items) > self.maxset)
        return left + ", ".join(shown) + right

    def repr_bytes(self, x: bytes | bytearray, level: int) -> str:
        """Show the start of bytes without rendering all of them."""
        head = repr(bytes(x[:self.maxstring])) + ("..." if len(x) > self.maxstring else "")
        return head if isinstance(x, bytes) else f"{type(x).__name__}({head})"

    repr_bytearray = repr_bytes

    def repr_instance(self, x: Any, level: int) -> str:
        """Name array-likes by shape and bound subclassed containers; cap any other repr."""
        try:
            shape = _shape(x)
        except Exception:
            shape = None
        if shape is not None:
            return f"<{_type_name(x)} shape={shape}>"
        if isinstance(x, dict):  # OrderedDict, defaultdict, Counter: never render them whole
            return f"{type(x).__name__}({self.repr_dict(x, level)})"
        if isinstance(x, (set, frozenset)):
            return self.repr_set(x, level)
        if isinstance(x, (list, tuple)) and len(x) > self.maxlist:
            return f"{type(x).__name__}({self._members(x, level, '[', ']')})"
        if isinstance(x, (str, bytes, bytearray)):
            return self.repr_str(x, level) if isinstance(x, str) else self.repr_bytes(x, level)
        return redact(super().repr_instance(x, level))


_SHORT = _ShortRepr()
