"""No floor the package declares, nor any version tests/floors.txt pins, has a known advisory.

pyproject.toml's requirements (the dependencies and every extra) are read as specifier sets,
and each is probed at the versions its own bounds and the advisories' bounds name, and at
their neighbours (the next patch, minor and major, and the release just below), which is
where a range that admits an affected release must touch one.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from jupyter_ci.advisories import ADVISORIES, Advisory, affecting, affects, normalise, upgrade_to
from tests.floors import CONSTRAINTS

ROOT = Path(__file__).resolve().parents[1]


def declared() -> list[Requirement]:
    """Return every requirement pyproject.toml declares, extras included."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [*project["dependencies"],
             *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return [Requirement(r) for r in names]


def pinned() -> dict[str, str]:
    """Return tests/floors.txt's pins, by normalised name."""
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[normalise(name.strip())] = version.strip()
    return pins


def probes(versions: Iterable[str]) -> Iterator[Version]:
    """Yield each version, its successors and the release just below it."""
    for text in versions:
        major, minor, patch = (*Version(text.removesuffix(".*")).release, 0, 0)[:3]
        yield from (Version(f"{major}.{minor}.{patch}"), Version(f"{major}.{minor}.{patch + 1}"),
                    Version(f"{major}.{minor + 1}.0"), Version(f"{major + 1}.0.0"))
        if patch:
            yield Version(f"{major}.{minor}.{patch - 1}")
        elif minor:
            yield Version(f"{major}.{minor - 1}.99")
        elif major:
            yield Version(f"{major - 1}.99.99")


def admitted(specifier: SpecifierSet, advisory: Advisory) -> list[str]:
    """Return the probed versions that `specifier` allows and `advisory` affects."""
    bounds = [s.version for s in specifier]
    bounds += [s.version for spec in advisory.affected for s in SpecifierSet(spec)]
    bounds += list(advisory.fixed)
    return sorted({str(v) for v in probes(bounds)
                   if specifier.contains(v, prereleases=True) and affects(advisory, str(v))},
                  key=Version)


def test_no_declared_requirement_admits_an_affected_version() -> None:
    found = {}
    for requirement in declared():
        for advisory in ADVISORIES:
            if advisory.package == normalise(requirement.name):
                hit = admitted(requirement.specifier, advisory)
                if hit:
                    found[f"{requirement} ({advisory.id})"] = hit
    assert found == {}
    # The stack's floors and the Hub are in the table, so this test reads them.
    assert {"jupyter-server", "jupyterhub"} <= {
        normalise(r.name) for r in declared()} & {a.package for a in ADVISORIES}


def test_no_pinned_floor_has_an_advisory() -> None:
    pins = pinned()
    assert "jupyter-server" in pins
    assert {name: [a.id for a in affecting(name, v)] for name, v in pins.items()
            if affecting(name, v)} == {}


@pytest.mark.parametrize(("requirement", "caught"), [
    ("jupyter_server>=2.14,<3", "2.14.0"),  # the floor before this table
    ("jupyter_server>=2.20.0", "2.20.0"),  # past the XSS, not the log leak
    ("jupyterhub>=5", "5.0.0"),
    ("jupyterhub>=5.5.3", "6.0.0"),  # 6.0.x lacks 6.1.0's fixes
    ("jupyterhub>=5.5.3,!=6.0.0", "6.0.1"),
])
def test_the_check_catches_a_floor_that_admits_an_affected_version(
        requirement: str, caught: str) -> None:
    parsed = Requirement(requirement)
    hits = {v for a in ADVISORIES if a.package == normalise(parsed.name)
            for v in admitted(parsed.specifier, a)}
    assert caught in hits


def test_each_advisory_is_fixed_where_it_says_and_names_an_upgrade() -> None:
    for advisory in ADVISORIES:
        assert advisory.summary and advisory.package == normalise(advisory.package)
        for fixed in advisory.fixed:
            assert not affects(advisory, fixed), advisory.id
    assert upgrade_to("jupyterhub", "5.4.4") == "5.5.3"
    assert upgrade_to("jupyterhub", "6.0.1") == "6.1.0"
    assert upgrade_to("jupyter_server", "2.14.0") == "2.21.0"
