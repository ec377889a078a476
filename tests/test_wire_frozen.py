"""`@frozen` (wire/frozen.py) behaves as `@dataclass(frozen=True)`, and `%load_ext` uses it.

Each shape below is declared twice, once with the standard library's frozen dataclass and
once with `@frozen`, and every test runs on both: what one does, the other must do.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import pickle
import subprocess
import sys
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any, ClassVar

import pytest

from jupyter_ci.wire import events as wire
from jupyter_ci.wire.codec import decode, encode
from jupyter_ci.wire.frozen import frozen


@dataclass(frozen=True)
class StdPoint:
    """Two fields, a class constant, a default made per instance."""

    kind: ClassVar[str] = "point"
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list, hash=False)


@frozen
class Point:
    """Two fields, a class constant, a default made per instance."""

    kind: ClassVar[str] = "point"
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list, hash=False)


@dataclass(frozen=True, kw_only=True)
class StdTagged:
    """Keyword-only; fields left out of equality, hash and repr."""

    name: str
    note: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    weight: int = field(default=0, hash=False)


@frozen(kw_only=True)
class Tagged:
    """Keyword-only; fields left out of equality, hash and repr."""

    name: str
    note: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    weight: int = field(default=0, hash=False)


@dataclass(frozen=True)
class StdEmpty:
    """No fields at all."""


@frozen
class Empty:
    """No fields at all."""


@dataclass(frozen=True)
class StdBox:
    """A field that may hold the box itself (through a list)."""

    items: list[object]


@frozen
class Box:
    """A field that may hold the box itself (through a list)."""

    items: list[object]


@dataclass(frozen=True)
class StdPoint3(StdPoint):
    """A subclass adds a field."""

    z: int = 0


@frozen
class Point3(Point):
    """A subclass adds a field."""

    z: int = 0


PAIRS = [(StdPoint, Point), (StdTagged, Tagged), (StdEmpty, Empty), (StdBox, Box),
         (StdPoint3, Point3)]
ARGS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "Point": ((1, 2, ["a"]), {}), "Tagged": ((), {"name": "n", "note": "x", "secret": "s"}),
    "Empty": ((), {}), "Box": (([1],), {}), "Point3": ((1, 2, [], 3), {}),
}


def make(cls: type) -> Any:
    """An instance of `cls` (either twin) from its shape's sample arguments."""
    args, kwargs = ARGS[cls.__name__.removeprefix("Std")]
    return cls(*copy.deepcopy(args), **copy.deepcopy(kwargs))


def outcome(run: Any) -> object:
    """What calling `run` gives: its value, or its exception's type and message."""
    try:
        return run()
    except Exception as exc:  # the failure is the value compared
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize(("std", "ours"), PAIRS, ids=[p[1].__name__ for p in PAIRS])
def test_repr_equality_hash_and_signature_are_the_standard_librarys(std: type, ours: type
                                                                    ) -> None:
    for cls in (std, ours):
        assert dataclasses.is_dataclass(cls)
    a, b = make(std), make(ours)
    assert repr(a).removeprefix("Std") == repr(b)
    assert str(inspect.signature(std)) == str(inspect.signature(ours))
    assert std.__match_args__ == ours.__match_args__
    assert [f.name for f in dataclasses.fields(std)] == [f.name for f in dataclasses.fields(ours)]
    assert (a == make(std), a != make(std)) == (b == make(ours), b != make(ours)) == (True, False)
    assert outcome(lambda: hash(a) == hash(make(std))) == outcome(  # a list field: TypeError
        lambda: hash(b) == hash(make(ours)))
    assert (a == b, b == a) == (False, False)  # another class's instance is never equal
    assert b.__eq__(object()) is NotImplemented
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert copy.deepcopy(b) == b and pickle.loads(pickle.dumps(b)) == b
    assert ours.__eq__.__qualname__ == f"{ours.__qualname__}.__eq__"


def test_equality_and_hash_follow_the_fields_compare_and_hash_flags() -> None:
    for cls in (StdTagged, Tagged):
        one, other_note = cls(name="n", note="a", weight=1), cls(name="n", note="b", weight=1)
        assert one == other_note and hash(one) == hash(other_note)  # note: compare=False
        lighter = cls(name="n", weight=2)
        assert one != lighter and hash(one) == hash(lighter)  # weight: hash=False
        assert "secret" not in repr(cls(name="n", secret="hidden"))
    assert {Point(1): "a"}[Point(1)] == "a"
    assert Point(1, tags=["x"]) != Point(1, tags=["y"])


@pytest.mark.parametrize(("std", "ours"), PAIRS, ids=[p[1].__name__ for p in PAIRS])
def test_nothing_is_assigned_added_or_deleted_after_init(std: type, ours: type) -> None:
    for cls in (std, ours):
        names = [f.name for f in dataclasses.fields(cls)]
        attempts = [lambda o, n=n: setattr(o, n, 1) for n in names]
        attempts += [lambda o, n=n: delattr(o, n) for n in names]
        attempts += [lambda o: setattr(o, "added", 1), lambda o: delattr(o, "added")]
        for attempt in attempts:
            instance = make(cls)
            before = dataclasses.asdict(instance)
            said = outcome(lambda i=instance, a=attempt: a(i))
            assert said == outcome(lambda a=attempt: a(make(std)))  # the same error, said alike
            assert said[0] == FrozenInstanceError.__name__  # type: ignore[index]
            assert dataclasses.asdict(instance) == before and not hasattr(instance, "added")


def test_replace_makes_a_new_instance_and_checks_the_names() -> None:
    for cls in (StdPoint, Point):
        point = cls(1, 2)
        moved = dataclasses.replace(point, y=5)
        assert (point.y, moved.y, moved.x) == (2, 5, 1)
        assert outcome(lambda c=point: dataclasses.replace(c, w=1))[0] == "TypeError"


def test_a_repr_of_an_instance_that_holds_itself_stops() -> None:
    for cls in (StdBox, Box):
        box = cls([])
        box.items.append(box)
        assert repr(box).removeprefix("Std") == "Box(items=[...])"


def test_a_method_the_class_defines_is_kept_and_its_own_setattr_refused() -> None:
    @frozen
    class Named:
        """Equality by name only, repr its own, hash its own."""

        name: str
        size: int = 0

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named) and other.name == self.name

        def __hash__(self) -> int:
            return 7

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert Named("a", 1) == Named("a", 2) and hash(Named("a")) == 7 and repr(Named("a")) == "<a>"
    for twin in (dataclass(frozen=True), frozen):
        with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):
            twin(type("Mutable", (), {"__annotations__": {"x": "int"},
                                      "__setattr__": object.__setattr__}))


def test_a_wire_event_decoded_from_json_is_frozen_and_equal_to_its_sample() -> None:
    event = wire.StepEnd(1, 1, "code", "x = 1", "ok", 3, 1.5, None)
    read = decode(wire.StepEnd, json.loads(json.dumps(encode(event))))
    assert read == event and hash(read) == hash(event)
    with pytest.raises(FrozenInstanceError):
        read.status = "error"  # type: ignore[misc]


#: Run in a fresh interpreter: what `%load_ext jupyter_ci` defines in the wire and the agent
#: core, and which of those classes the standard library made frozen (six generated methods).
CENSUS = """
import dataclasses, json, sys
from IPython.core.interactiveshell import InteractiveShell
InteractiveShell.instance().run_line_magic("load_ext", "jupyter_ci")
from jupyter_ci.wire import frozen
found = {}
for name, module in sorted(sys.modules.items()):
    if name.startswith(("jupyter_ci.wire.", "jupyter_ci.agent.")) and module is not None:
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == name and dataclasses.is_dataclass(cls):
                sealed = getattr(cls.__setattr__, "__module__", None) == frozen.__name__
                found[cls.__qualname__ + " in " + name] = (
                    "frozen" if sealed else "stdlib-frozen"
                    if cls.__dataclass_params__.frozen else "mutable")
print(json.dumps(found))
"""


def test_load_ext_defines_its_frozen_wire_and_agent_classes_with_frozen() -> None:
    out = subprocess.run([sys.executable, "-c", CENSUS], capture_output=True, text=True,
                         check=True).stdout
    kinds: dict[str, str] = json.loads(out.splitlines()[-1])
    assert sum(kind == "frozen" for kind in kinds.values()) > 80, kinds
    costly = sorted(name for name, kind in kinds.items() if kind == "stdlib-frozen")
    assert costly == [], ("%load_ext defines these with @dataclass(frozen=True), six exec'd "
                          f"methods each; use jupyter_ci.wire.frozen.frozen: {costly}")
