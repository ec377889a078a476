"""`@frozen`: a frozen dataclass, as `@dataclass(frozen=True)` makes it, for a third of the cost.

Python 3.11's dataclasses compile every method they write with an `exec` of its own, and a
frozen class gets six (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`,
`__delattr__`): about 0.6 ms a class on these machines, most of `%load_ext jupyter_ci`,
which defines over a hundred. Here the standard library writes `__init__` alone; the other
five are functions built over the class's field names, with the same behaviour:

- equality and hashing by the fields' values (`field(compare=..., hash=...)` honoured), and
  only between instances of the same class;
- the standard repr (`field(repr=False)` honoured, `...` where an instance holds itself);
- no field assigned again, no attribute added and none deleted once `__init__` has run:
  `dataclasses.FrozenInstanceError`, as from a frozen dataclass;
- a method the class defines itself is kept (a `__setattr__` or `__delattr__` is refused).

Type checkers read `@frozen` as `@dataclass(frozen=True)` (PEP 681): mypy refuses an
assignment to a field. A subclass of a `@frozen` class is `@frozen` too (the standard
library refuses a frozen dataclass over a class it does not know as frozen).
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")
Values = Callable[[object], tuple[object, ...]]


@overload
def frozen(cls: type[T], /) -> type[T]: ...
@overload
def frozen(*, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen(cls: type[T] | None = None, /, *, kw_only: bool = False
           ) -> type[T] | Callable[[type[T]], type[T]]:
    """Make `cls` a frozen dataclass (as `@dataclass(frozen=True, kw_only=...)` would)."""
    def wrap(plain: type[T]) -> type[T]:
        hashed_by_class = _explicit_hash(plain)
        made = dataclasses.dataclass(plain, eq=False, repr=False, kw_only=kw_only)
        _seal(made, keep_hash=hashed_by_class)
        return made

    return wrap if cls is None else wrap(cls)


def _explicit_hash(cls: type) -> bool:
    """Tell whether the class body sets `__hash__` itself (the rule `dataclass` follows)."""
    own = cls.__dict__.get("__hash__", dataclasses.MISSING)
    # A body that defines __eq__ alone gets __hash__ = None from Python: not its own choice.
    return not (own is dataclasses.MISSING or (own is None and "__eq__" in cls.__dict__))


def _seal(cls: type, keep_hash: bool) -> None:
    """Give the dataclass `cls` its equality, hash, repr and immutability."""
    fields = dataclasses.fields(cls)
    for name in ("__setattr__", "__delattr__"):
        if name in cls.__dict__:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    _add(cls, _equality(_values(tuple(f.name for f in fields if f.compare))))
    _add(cls, _representation(tuple(f.name for f in fields if f.repr)))
    if not keep_hash:
        hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        _add(cls, _hashing(_values(hashed)), replace=True)
    names = frozenset(f.name for f in fields)
    _add(cls, _assign_once(names), replace=True)
    _add(cls, _no_delete(), replace=True)


def _add(cls: type, method: Callable[..., Any], replace: bool = False) -> None:
    """Set `method` on `cls` under its name, unless the class body defines that name."""
    name = method.__name__
    if replace or name not in cls.__dict__:
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)


def _values(names: tuple[str, ...]) -> Values:
    """Return a function giving an instance's values of `names`, as a tuple."""
    if not names:
        return lambda _: ()
    get = operator.attrgetter(*names)
    if len(names) == 1:
        return lambda instance: (get(instance),)
    return get  # attrgetter of two names or more returns their tuple


def _equality(values: Values) -> Callable[[object, object], Any]:
    def __eq__(self: object, other: object) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hashing(values: Values) -> Callable[[object], int]:
    def __hash__(self: object) -> int:
        return hash(values(self))

    return __hash__


def _representation(names: tuple[str, ...]) -> Callable[[object], str]:
    @reprlib.recursive_repr()
    def __repr__(self: object) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _assign_once(names: frozenset[str]) -> Callable[[object, str, object], None]:
    # __init__ sets each field once, through this; after it nothing is set (frozen).
    def __setattr__(self: object, name: str, value: object, /) -> None:
        held = self.__dict__
        if name in held or name not in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        held[name] = value

    return __setattr__


def _no_delete() -> Callable[[object, str], None]:
    def __delattr__(self: object, name: str, /) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    return __delattr__
