"""One codec between the wire dataclasses and JSON values.

`encode(obj)` gives a dataclass's JSON value: its fields in declaration order, tuples as
lists, nested dataclasses as objects. `decode(cls, value)` reads one back and checks it
whole: unknown fields refused, `Literal`, optional, tuple, list, dict, nested dataclasses and
tagged unions (a `type: ClassVar[Literal["…"]]`, written first) checked, and an error
names the path of the bad field (`steps[2].status: expected one of 'ok', 'error', got 'fine'`).
A `TypedDict` (or a union of them: Jupyter's own shapes, wire/nbformat.py) is a JSON object
written as is; reading one checks only that it is an object and its tag, the `Literal` key
all of them have (an nbformat output's `output_type`); a lenient read only that it is an object.
`decode(cls, value, lenient=True)` reads what a notebook holds, which anyone may have
written or edited: unknown fields ignored, a missing field its default (else "", 0, false,
null or empty), an optional part of the wrong type null; a required field of the wrong type
still refuses the whole value.
Each class's plan is built once; the encoder is compiled to one function per class because
the kernel's comm encodes every output event.

Field metadata (`dataclasses.field(metadata=...)`) changes one field's JSON form:
`OMIT_IF` leaves it out when it equals that value, `ROUND` rounds a float to that many
decimals, `FLATTEN` puts a nested dataclass's fields beside the outer ones.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar, Union, overload

T = TypeVar("T")
#: A field left out of the JSON when it equals this value (and read as it when absent).
OMIT_IF = "wire.omit_if"
#: A float field rounded to this many decimals (float sums carry noise far below a cent).
ROUND = "wire.round"
#: A nested dataclass whose fields are written beside the outer class's own.
FLATTEN = "wire.flatten"
#: JSON Schema keywords a field's openapi.json schema adds to its type's (scripts/gen_wire.py).
SCHEMA = "wire.schema"

Encode = Callable[[Any], Any]
Decode = Callable[[Any, str], Any]


class WireError(ValueError):
    """A JSON value that does not read as the wire class asked for; `path` names the field."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


def encode(obj: Any) -> Any:
    """Return the JSON value of a wire dataclass (or of a list, tuple, dict of them)."""
    known = _ENCODERS.get(type(obj))
    if known is not None:
        return known(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _encoder_of(type(obj))(obj)
    if isinstance(obj, list | tuple):
        return [encode(item) for item in obj]
    if isinstance(obj, dict):
        return {key: encode(item) for key, item in obj.items()}
    return obj


@overload
def decode(cls: type[T], value: Any, *, lenient: bool = False) -> T: ...
@overload
def decode(cls: object, value: Any, *, lenient: bool = False) -> Any: ...
def decode(cls: object, value: Any, *, lenient: bool = False) -> Any:
    """Read `value` as a `cls` (a class or a union), or raise WireError naming the bad field."""
    return _decoder(cls, lenient)(value, "")


def tag_of(cls: type) -> str | None:
    """Return a tagged class's `type` (a `ClassVar[Literal[...]]`; None when it has none)."""
    tag = cls.__dict__.get("type")
    return tag if isinstance(tag, str) else None


def hints(cls: type) -> dict[str, object]:
    """Return the resolved type of each field of `cls`."""
    found = _HINTS.get(cls)
    if found is None:
        found = _HINTS[cls] = typing.get_type_hints(cls)
    return found


_HINTS: dict[type, dict[str, object]] = {}
_ENCODERS: dict[type, Encode] = {}
_DECODERS: dict[Any, Decode] = {}


def _encoder_of(cls: type) -> Encode:
    found = _ENCODERS.get(cls)
    if found is None:
        found = _ENCODERS[cls] = _compile(cls)
    return found


def _compile(cls: type) -> Encode:
    """Write the class's encoder as one function: a dict display when nothing is optional."""
    names: dict[str, object] = {}
    steps: list[str] = []
    pairs: list[str] = []
    if (tag := tag_of(cls)) is not None:  # first, as every door has always written it
        steps.append(f"    d['type'] = {tag!r}")
        pairs.append(f"'type': {tag!r}")
    for item in dataclasses.fields(cls):
        fn = _value_encoder(hints(cls)[item.name], item.metadata.get(ROUND))
        get = f"o.{item.name}"
        if fn is not None:
            names[f"e_{item.name}"] = fn
            get = f"e_{item.name}(o.{item.name})"
        if item.metadata.get(FLATTEN):
            steps.append(f"    d.update({get})")
        elif OMIT_IF in item.metadata:
            names[f"d_{item.name}"] = item.metadata[OMIT_IF]
            steps.append(f"    if o.{item.name} != d_{item.name}: d[{item.name!r}] = {get}")
        else:
            steps.append(f"    d[{item.name!r}] = {get}")
            pairs.append(f"{item.name!r}: {get}")
    if len(pairs) == len(steps):
        source = f"def encode(o):\n    return {{{', '.join(pairs)}}}\n"
    else:
        source = "def encode(o):\n    d = {}\n" + "\n".join(steps) + "\n    return d\n"
    exec(source, names)  # compiled once per class: the comm encodes every output event
    return typing.cast(Encode, names["encode"])


def _value_encoder(tp: Any, digits: int | None = None) -> Encode | None:
    """Return how to encode a value of type `tp`, or None when it is its own JSON."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if digits is not None:
        return lambda v: None if v is None else round(v, digits)
    if dataclasses.is_dataclass(tp):
        return _encoder_of(typing.cast(type, tp))
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if any(dataclasses.is_dataclass(a) for a in inner):
            return lambda v: None if v is None else _encoder_of(type(v))(v)
        if len(inner) == 1:
            return _optional(_value_encoder(inner[0]))
        return None
    if origin in (tuple, list):
        each = _value_encoder(args[0]) if args else None
        if each is None:
            return list
        one: Encode = each
        return lambda v: [one(i) for i in v]
    if origin is dict:
        item = _value_encoder(args[1]) if args else None
        return None if item is None else (lambda v: {k: item(i) for k, i in v.items()})
    return None


def _optional(fn: Encode | None) -> Encode | None:
    if fn is None:
        return None
    some: Encode = fn
    return lambda v: None if v is None else some(v)


def _decoder(tp: Any, lenient: bool = False) -> Decode:
    found = _DECODERS.get((tp, lenient))
    if found is None:
        found = _DECODERS[(tp, lenient)] = _build_decoder(tp, lenient)
    return found


def _fail(path: str, expected: str, value: Any) -> WireError:
    where = f"{path}: " if path else ""
    return WireError(f"{where}expected {expected}, got {value!r}", path)


def _build_decoder(tp: Any, lenient: bool) -> Decode:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or tp is object:
        return lambda v, path: v
    if dataclasses.is_dataclass(tp):
        return _object_decoder(typing.cast(type, tp), lenient)
    if typing.is_typeddict(tp):
        return _typed_dict_decoder((tp,), False, lenient)
    if origin is Literal:
        return _literal_decoder(args)
    if origin in (Union, types.UnionType):
        return _union_decoder(args, lenient)
    if origin in (tuple, list):
        return _sequence_decoder(origin, args, lenient)
    if origin is dict:
        return _dict_decoder(args[1] if args else Any, lenient)
    return _scalar_decoder(tp)


def _scalar_decoder(tp: Any) -> Decode:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
             type(None): "null"}
    if tp not in names:
        raise TypeError(f"the wire codec has no JSON form for {tp!r}")
    accepts = (int, float) if tp is float else (tp,)

    def read(value: Any, path: str) -> Any:
        if not isinstance(value, accepts) or (tp is not bool and isinstance(value, bool)):
            raise _fail(path, names[tp], value)
        return float(value) if tp is float else value
    return read


def _literal_decoder(allowed: tuple[Any, ...]) -> Decode:
    said = ", ".join(repr(a) for a in allowed)

    def read(value: Any, path: str) -> Any:
        if not any(value == a and type(value) is type(a) for a in allowed):
            raise _fail(path, f"one of {said}" if len(allowed) > 1 else said, value)
        return value
    return read


def _union_decoder(args: tuple[Any, ...], lenient: bool) -> Decode:
    optional = type(None) in args
    inner = [a for a in args if a is not type(None)]
    if all(typing.is_typeddict(a) for a in inner):
        return _typed_dict_decoder(tuple(inner), optional, lenient)
    tags = {tag_of(typing.cast(type, a)): a for a in inner if dataclasses.is_dataclass(a)}
    if len(tags) == len(inner) > 1 and None not in tags:
        return _tagged_decoder(tags, optional, lenient)
    readers = [_decoder(a, lenient) for a in inner]

    def read(value: Any, path: str) -> Any:
        if value is None and optional:
            return None
        errors = []
        for reader in readers:
            try:
                return reader(value, path)
            except WireError as err:
                errors.append(err)
        if lenient and optional:
            return None  # a notebook's optional part of the wrong type reads as absent
        raise errors[0] if len(errors) == 1 else _fail(path, _said(args), value)
    return read


def _said(args: tuple[Any, ...]) -> str:
    return " or ".join("null" if a is type(None) else getattr(a, "__name__", str(a))
                       for a in args)


def _tagged_decoder(tags: dict[str | None, Any], optional: bool, lenient: bool) -> Decode:
    said = ", ".join(repr(t) for t in tags)

    def read(value: Any, path: str) -> Any:
        if value is None and optional:
            return None
        kind = value.get("type") if isinstance(value, dict) else None
        if kind not in tags:
            raise _fail(f"{path}.type" if path else "type", f"one of {said}", kind)
        return _decoder(tags[kind], lenient)(value, path)
    return read


def _typed_dict_decoder(kinds: tuple[Any, ...], optional: bool, lenient: bool) -> Decode:
    """Read a JSON object as one of the TypedDicts `kinds`: only the object and its tag checked."""
    keys = [{k: t for k, t in typing.get_type_hints(kind).items()
             if typing.get_origin(t) is Literal} for kind in kinds]
    tags = {} if lenient else {
        key: tuple(a for found in keys for a in typing.get_args(found[key]))
        for key in set.intersection(*(set(found) for found in keys))}

    def read(value: Any, path: str) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _fail(path, "an object", value)
        for key, allowed in tags.items():
            if not any(value.get(key) == a and type(value.get(key)) is type(a) for a in allowed):
                said = ", ".join(repr(a) for a in allowed)
                raise _fail(f"{path}.{key}" if path else key, f"one of {said}", value.get(key))
        return value
    return read


def _sequence_decoder(origin: Any, args: tuple[Any, ...], lenient: bool) -> Decode:
    fixed = origin is tuple and args and args[-1] is not Ellipsis
    readers = ([_decoder(a, lenient) for a in args] if fixed
               else [_decoder(args[0] if args else Any, lenient)])

    def read(value: Any, path: str) -> Any:
        if not isinstance(value, list) or (fixed and len(value) != len(readers)):
            raise _fail(path, f"a list of {len(readers)}" if fixed else "a list", value)
        items = [(readers[i] if fixed else readers[0])(v, f"{path}[{i}]")
                 for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    return read


def _dict_decoder(item_type: Any, lenient: bool) -> Decode:
    item = _decoder(item_type, lenient)

    def read(value: Any, path: str) -> Any:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _fail(path, "an object", value)
        return {k: item(v, f"{path}.{k}" if path else k) for k, v in value.items()}
    return read


def _object_decoder(cls: type, lenient: bool) -> Decode:
    fields = [(f, _decoder(hints(cls)[f.name], lenient)) for f in dataclasses.fields(cls)]
    own = {f.name for f, _ in fields if not f.metadata.get(FLATTEN)}
    tag = tag_of(cls)
    if tag is not None:
        own.add("type")
    # A lenient read takes a missing required field as its type's zero (its reader checks it).
    zeros = {f.name: _zero(hints(cls)[f.name]) for f, _ in fields if lenient and _required(f)}

    def read(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise _fail(path, f"an object ({cls.__name__})", value)
        if zeros:
            value = {**zeros, **value}
        if tag is not None and value.get("type") != tag:
            raise _fail(f"{path}.type" if path else "type", repr(tag), value.get("type"))
        flat = any(f.metadata.get(FLATTEN) for f, _ in fields)
        if not flat and not lenient and (extra := sorted(set(value) - own)):
            where = f"{path}.{extra[0]}" if path else extra[0]
            raise WireError(f"{where}: unknown field of {cls.__name__}", where)
        given: dict[str, object] = {}
        for item, reader in fields:
            given.update(_field(item, reader, value, path, own))
        return cls(**given)
    return read


def _field(item: dataclasses.Field[Any], reader: Decode, value: dict[str, object], path: str,
           own: set[str]) -> dict[str, object]:
    """Read one field of an object (nothing when it is absent and has a default)."""
    where = f"{path}.{item.name}" if path else item.name
    if item.metadata.get(FLATTEN):
        return {item.name: reader({k: v for k, v in value.items() if k not in own}, path)}
    if item.name not in value:
        if OMIT_IF in item.metadata:
            return {item.name: item.metadata[OMIT_IF]}
        has_default = (item.default is not dataclasses.MISSING
                       or item.default_factory is not dataclasses.MISSING)
        if not has_default:
            raise WireError(f"{where}: missing", where)
        return {}
    return {item.name: reader(value[item.name], where)}


def _required(item: dataclasses.Field[Any]) -> bool:
    """Tell whether a field must be given (no default, not left out when empty, not flat)."""
    return (item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
            and OMIT_IF not in item.metadata and not item.metadata.get(FLATTEN))


def _zero(tp: Any) -> Any:
    """Return what a lenient read takes for a missing field of type `tp`."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return None
    zeros: dict[Any, object] = {str: "", int: 0, float: 0.0, bool: False, tuple: [], list: [],
                                dict: {}}
    return zeros.get(origin or tp)
