"""The TypedDict twins of the REST wire classes say exactly what the codec writes."""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from typing import Literal

import pytest

from jupyter_ci.wire.codec import OMIT_IF, encode, hints, tag_of
from jupyter_ci.wire.events import ProposedEdit, WaitingForUser
from jupyter_ci.wire.rest import ApprovalReply, FileEntry, SessionInfo
from jupyter_ci.wire.shapes import TWINS, shape_of


def json_type(tp: object) -> object:
    """Return the type a wire field's value has in JSON: a dataclass its twin, a tuple a list."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return TWINS[tp]
    if origin is tuple:
        return list[json_type(args[0])]  # built at run time, compared
    if origin in (typing.Union, types.UnionType):
        return functools.reduce(operator.or_, (json_type(a) for a in args))
    return tp


@pytest.mark.parametrize("cls", list(TWINS), ids=lambda cls: cls.__name__)
def test_each_twin_has_its_class_fields_and_types(cls: type) -> None:
    twin = TWINS[cls]
    fields = dataclasses.fields(cls)
    expected = {f.name: json_type(hints(cls)[f.name]) for f in fields}
    optional = {f.name for f in fields if OMIT_IF in f.metadata}
    if (tag := tag_of(cls)) is not None:
        expected = {"type": Literal[tag], **expected}
    assert typing.get_type_hints(twin) == expected
    assert list(typing.get_type_hints(twin)) == list(expected)  # the order the codec writes
    assert twin.__optional_keys__ == optional
    assert twin.__required_keys__ == set(expected) - optional


def test_a_twin_that_drifted_is_seen() -> None:
    class Drifted(typing.TypedDict):
        path: str
        size: str
        mime: str

    assert typing.get_type_hints(Drifted) != {
        f.name: json_type(hints(FileEntry)[f.name]) for f in dataclasses.fields(FileEntry)}


def test_shape_of_is_the_codec_json() -> None:
    edit = ProposedEdit("c1", "cell", "a", "b")
    question = WaitingForUser("Run?", "edits", 2, 1, None, None, (edit,), "ap1", "ask1")
    info = SessionInfo("s", "k", "python3", "idle", "t0", "t1", 0, True, "python", "/d")
    for obj in (FileEntry("a", 1, "text/plain"), info, question,
                ApprovalReply("ap1", "ask1", "edit", code="x")):
        assert shape_of(obj) == encode(obj)
