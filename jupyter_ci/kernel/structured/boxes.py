"""Find box-and-whisker plots among an Axes' lines and patches (charts.py reads the rest).

matplotlib keeps no container for `Axes.boxplot` (pandas' box plots call it too): each box is
a closed outline (a Line2D, or a PathPatch with `patch_artist=True`), two whiskers that
start on its edges, a median across it, and optional caps, fliers and means. A box counts
only when its outline, both whiskers and its median are all found, so a lone rectangle or
outline is not read as one.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

#: A closed outline has at least this many vertices (a plain box 5, a notched one 11).
MIN_OUTLINE = 5
#: Points (x, y) in data coordinates, and an artist with its points.
XY = list[tuple[float, float]]
Drawn = tuple[Any, XY]


@dataclass
class FoundBox:
    """One box's statistics in data numbers, and where it stands."""

    #: Its centre on the position axis (x for vertical boxes, y for horizontal ones).
    position: float
    horizontal: bool
    whislo: float
    q1: float
    median: float
    q3: float
    whishi: float
    fliers: list[float] = field(default_factory=list)


def find_boxes(ax: Any) -> tuple[list[FoundBox], set[int]]:
    """Return the Axes' boxes by position, and the ids of the artists they are drawn with."""
    drawn = [(line, line.get_xydata()) for line in ax.get_lines() if line.get_visible()]
    outlines = [(line, _xy(data)) for line, data in drawn
                if len(data) >= MIN_OUTLINE and bool((data[0] == data[-1]).all())]
    outlines += [(patch, xy) for patch in ax.patches
                 if type(patch).__name__ == "PathPatch" and _closed(xy := _vertices(patch))]
    if not outlines:
        return [], set()
    segments = [(line, _xy(data)) for line, data in drawn if len(data) == 2]
    # Segments by their middle along x, and along y: a box looks only at those within it.
    index = {horizontal: _Index(segments, 1 if horizontal else 0)
             for horizontal in (False, True)}
    used: set[int] = set()
    boxes = []
    for outline, xy in outlines:
        for horizontal in (False, True):
            box = _box(xy, index[horizontal], used, horizontal)
            if box is not None:
                used.add(id(outline))
                boxes.append(box)
                break
    if boxes:
        markers = [(line, data) for line, data in drawn if id(line) not in used
                   and str(line.get_linestyle()) in ("None", "", " ")]
        _markers(boxes, markers, used)
    return sorted(boxes, key=lambda box: box.position), used


class _Index:
    """Segments sorted by their middle along one axis (each with its drawing order)."""

    def __init__(self, segments: list[Drawn], along: int) -> None:
        ordered = sorted(((xy[0][along] + xy[1][along]) / 2, n)
                         for n, (_, xy) in enumerate(segments))
        self.keys = [key for key, _ in ordered]
        self.order = [n for _, n in ordered]
        self.segments = segments

    def within(self, low: float, high: float) -> list[Drawn]:
        """Return the segments whose middle is within [low, high], in drawing order."""
        start, end = bisect_left(self.keys, low), bisect_right(self.keys, high)
        return [self.segments[n] for n in sorted(self.order[start:end])]


def _xy(data: Any) -> XY:
    return [(float(x), float(y)) for x, y in data]


def _vertices(patch: Any) -> XY:
    """Return a PathPatch's vertices in data coordinates (its closing vertex left out)."""
    path = patch.get_path()
    codes = path.codes
    data = _xy(path.vertices)
    return data[:-1] if codes is not None and len(codes) and codes[-1] == path.CLOSEPOLY \
        else data


def _closed(xy: XY) -> bool:
    return len(xy) >= MIN_OUTLINE and xy[0] == xy[-1]


def _same(a: float, b: float, span: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=span * 1e-9)


def _box(outline: XY, index: _Index, used: set[int], horizontal: bool) -> FoundBox | None:
    """Read one outline as a box standing along x (or y when horizontal), if it is one."""
    p, v = (1, 0) if horizontal else (0, 1)
    a0, a1 = min(pt[p] for pt in outline), max(pt[p] for pt in outline)
    b0, b1 = min(pt[v] for pt in outline), max(pt[v] for pt in outline)
    span = max(abs(a1 - a0), abs(b1 - b0), 1.0)
    slack = span * 1e-9
    free = [(line, xy) for line, xy in index.within(a0 - slack, a1 + slack)
            if id(line) not in used]
    # Whiskers start on the outline at the quartiles (a notch may reach beyond those).
    edges = [pt[v] for pt in outline]
    whiskers = [(line, xy) for line, xy in free if _same(xy[0][p], xy[1][p], span)
                and a0 < xy[0][p] < a1 and any(_same(xy[0][v], e, span) for e in edges)]
    low = next(((line, xy) for line, xy in whiskers if xy[1][v] <= xy[0][v]), None)
    if low is None:
        return None
    pos = low[1][0][p]
    high = next(((line, xy) for line, xy in whiskers if xy[1][v] >= xy[0][v] >= low[1][0][v]
                 and _same(xy[0][p], pos, span) and line is not low[0]), None)
    if high is None:
        return None
    lo, hi = low[1][1][v], high[1][1][v]
    # Lines across the box: its median, and a mean drawn as a line (meanline=True); caps
    # at the whiskers' ends when those are on the box' edge too.
    across = [(line, xy) for line, xy in free if line not in (low[0], high[0])
              and _same(xy[0][v], xy[1][v], span) and b0 <= xy[0][v] <= b1
              and all(a0 - span * 1e-9 <= pt[p] <= a1 + span * 1e-9 for pt in xy)]
    inner = [d for d in across if not any(_same(d[1][0][v], e, span) for e in (lo, hi))]
    if not (inner or across):
        return None
    median = (inner or across)[0]  # drawn before a mean line, in every matplotlib
    caps = [line for line, xy in free if _same(xy[0][v], xy[1][v], span)
            and _same((xy[0][p] + xy[1][p]) / 2, pos, span)
            and any(_same(xy[0][v], end, span) for end in (lo, hi))]
    used.update({id(low[0]), id(high[0]), id(median[0]), *map(id, caps),
                 *(id(line) for line, _ in inner)})
    return FoundBox(pos, horizontal, lo, low[1][0][v], median[1][0][v], high[1][0][v], hi)


def _markers(boxes: list[FoundBox], lines: list[tuple[Any, Any]], used: set[int]) -> None:
    """Give each box its fliers (beyond its whiskers), and take its mean markers."""
    at = {horizontal: sorted((box.position, n) for n, box in enumerate(boxes)
                             if box.horizontal == horizontal) for horizontal in (False, True)}
    for line, data in lines:
        if not len(data):  # a box without fliers still draws an empty line for them
            used.add(id(line))
            continue
        xy = _xy(data)
        for box in _boxes_at(boxes, at, xy[0]):
            p, v = (1, 0) if box.horizontal else (0, 1)
            span = max(abs(box.whishi - box.whislo), 1.0)
            if not all(_same(pt[p], box.position, span) for pt in xy):
                continue
            values = [pt[v] for pt in xy]
            inside = all(box.whislo <= value <= box.whishi for value in values)
            if not (inside and len(values) == 1):  # one point within: its mean marker
                box.fliers.extend(values)
            used.add(id(line))
            break


def _boxes_at(boxes: list[FoundBox], at: dict[bool, list[tuple[float, int]]],
              point: tuple[float, float]) -> list[FoundBox]:
    """Return the boxes standing where a point is (on the position axis), nearest first."""
    found = []
    for horizontal, positions in at.items():
        place = point[1] if horizontal else point[0]
        start = bisect_left(positions, (place - abs(place) * 1e-6 - 1e-9, -1))
        found += [boxes[n] for _, n in positions[start:start + 2]]
    return found
