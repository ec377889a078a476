"""Known advisories of the packages jupyter-ci runs on, and which versions they affect.

The floors pyproject.toml declares and tests/floors.txt pins must admit none of these
(tests/test_advisories.py), and `jupyter_ci.hub.configure` refuses a running JupyterHub that
one affects. Ranges are PEP 440 specifier sets, one per line of releases; `fixed` names the
first fixed release of each line that got the fix; older lines, which get no fixes, count as
affected. Sources: each package's changelog on PyPI (jupyterhub 6.1.1's sdist:
docs/source/reference/changelog.md) and its advisories; where a changelog names no advisory
(jupyter_server 2.18.x), the range ends at the release its advisories say fixed them.
`packaging` (a dependency of jupyter_server and of JupyterHub) is imported only when a
version is checked.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Advisory:
    """One published vulnerability of one package."""

    #: The package's name on PyPI, normalised (lower case, `-` for `_`).
    package: str
    #: CVE id, else the GitHub advisory's (GHSA) id.
    id: str
    #: The versions it affects: one PEP 440 specifier set per line of releases.
    affected: tuple[str, ...]
    #: The first fixed release of each line that has one, oldest first.
    fixed: tuple[str, ...]
    #: What it is, in one line.
    summary: str


ADVISORIES: tuple[Advisory, ...] = (
    Advisory("jupyter-server", "CVE-2026-44727", ("<2.20.0",), ("2.20.0",),
             "Stored XSS in the nbconvert handlers: a notebook's HTML output (a model's, "
             "linked from its answer) runs as script on Jupyter's origin (critical)."),
    Advisory("jupyter-server", "CVE-2026-86049", ("<2.21.0",), ("2.21.0",),
             "A token in the Referer of a request that fails with a 5xx is written to the "
             "server's log in plain text (GHSA-c3mw-737p-c7g2, medium)."),
    Advisory("jupyter-server", "CVE-2026-35397", ("<2.18.2",), ("2.18.2",),
             "Path traversal in /api/contents into sibling folders whose names start with "
             "root_dir's (high)."),
    Advisory("jupyter-server", "CVE-2026-40110", ("<2.18.2",), ("2.18.2",),
             "CORS origin check bypassed through an unanchored regular expression (high)."),
    Advisory("jupyter-server", "CVE-2026-40934", ("<2.18.2",), ("2.18.2",),
             "High-severity advisory fixed with the 2.18 releases (see its text)."),
    Advisory("jupyter-server", "CVE-2026-5422", ("<2.18.2",), ("2.18.2",),
             "Advisory fixed with the 2.18 releases (see its text)."),
    Advisory("jupyter-server", "CVE-2025-61669", ("<2.18.2",), ("2.18.2",),
             "Medium-severity advisory fixed with the 2.18 releases (see its text)."),
    Advisory("jupyterhub", "CVE-2026-33709", ("<5.4.4",), ("5.4.4",),
             "Open redirect after login (GHSA-3vff-hjqv-m7h8)."),
    Advisory("jupyterhub", "CVE-2026-40864", ("<5.4.5",), ("5.4.5",),
             "Cross-site request forgery against the Hub (GHSA-m68r-v472-jgq9, moderate)."),
    Advisory("jupyterhub", "CVE-2026-54338", ("<5.5.0",), ("5.5.0",),
             "Unauthenticated denial of service: failed logins log usernames of any "
             "length (GHSA-p43p-whwx-q52h, moderate)."),
    Advisory("jupyterhub", "GHSA-c4gm-pwx9-9w8j", ("<5.5.1",), ("5.5.1",),
             "User-initiated sharing grants more than was shared (high; deployments that "
             "enable sharing)."),
    Advisory("jupyterhub", "GHSA-69wv-m5fw-2fhp", ("<5.5.1",), ("5.5.1",),
             "Filtered admin roles (admin:users!group=...) not fully enforced (low)."),
    Advisory("jupyterhub", "GHSA-mj6q-mp44-53v8", ("<5.5.2",), ("5.5.2",),
             "Sharing with a user who was renamed (low)."),
    Advisory("jupyterhub", "GHSA-hx46-2cv3-mh6g", ("<5.5.3", ">=6.0.0,<6.1.0"),
             ("5.5.3", "6.1.0"),
             "Authenticated denial of service through invalid spawner options (moderate; "
             "most deployments)."),
    Advisory("jupyterhub", "GHSA-5jhc-4h3c-q97h", ("<5.5.3", ">=6.0.0,<6.1.0"),
             ("5.5.3", "6.1.0"),
             "LocalProcessSpawner drops privileges incompletely when setgroups() fails "
             "(moderate, rare)."),
    Advisory("jupyterhub", "GHSA-93gc-h923-mp36", ("<5.5.3", ">=6.0.0,<6.1.0"),
             ("5.5.3", "6.1.0"),
             "User and service names not validated in URL components (moderate)."),
    Advisory("jupyterhub", "GHSA-x7xh-7hc7-9436", ("<5.5.3", ">=6.0.0,<6.1.0"),
             ("5.5.3", "6.1.0"),
             "XSS through the user rename API (moderate; needs admin permissions)."),
    Advisory("jupyterhub", "GHSA-pvm9-48cg-w76j", ("<5.5.3", ">=6.0.0,<6.1.0"),
             ("5.5.3", "6.1.0"),
             "token_expires_in_max_seconds not enforced when set (moderate)."),
    Advisory("jupyterhub", "GHSA-r764-xgvf-jrfj", ("<5.5.3", ">=6.0.0,<6.1.0"),
             ("5.5.3", "6.1.0"),
             "SharedPasswordAuthenticator does not normalise usernames for admin_users "
             "(moderate)."),
)


def normalise(name: str) -> str:
    """Return a package's name as the table spells it."""
    return name.lower().replace("_", "-").replace(".", "-")


def affects(advisory: Advisory, version: str) -> bool:
    """Say whether `advisory` affects `version` of its package."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return any(SpecifierSet(spec).contains(Version(version), prereleases=True)
               for spec in advisory.affected)


def affecting(package: str, version: str) -> list[Advisory]:
    """Return the advisories of `package` that affect `version`."""
    name = normalise(package)
    return [a for a in ADVISORIES if a.package == name and affects(a, version)]


def upgrade_to(package: str, version: str) -> str:
    """Return the oldest release after `version` that no advisory affects ("" if none)."""
    from packaging.version import Version

    name = normalise(package)
    fixes = sorted({Version(v) for a in ADVISORIES if a.package == name for v in a.fixed
                    if Version(v) > Version(version)})
    return next((str(v) for v in fixes if not affecting(name, str(v))), "")
