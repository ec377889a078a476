"""detect-secrets' regex rules, kept in a cache so a kernel's first ask does not import it.

Importing detect-secrets takes ~80 ms (it imports `requests` for its online verifiers); what
redaction uses of it is its regex plugins. The first process that imports it (the server as
it starts, or a kernel outside a server at its first ask) writes their patterns to a cache
file keyed by the installed package; later processes compile them from there in ~3 ms, at
`%load_ext`. A rule is (plugin name, patterns, whether matches must be well-formed JWTs).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Its entropy plugins are left out (they flag the hashes and ids data is full of), and so
# are its keyword plugin (names are judged by secrets.is_secret_name, which knows code) and
# its public-IP plugin (an address is not a credential).
SKIPPED_PLUGINS = frozenset({
    "Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector",
})
_JWT_PLUGIN = "JwtTokenDetector"
_FORMAT = 1


@dataclass(frozen=True)
class Rule:
    """One detect-secrets regex plugin: its patterns, and whether a match must be a JWT."""

    name: str
    patterns: tuple[re.Pattern[str], ...]
    jwt: bool = False

    def find(self, line: str) -> Iterator[str]:
        """Yield what the plugin would report in `line` (each group of a grouped pattern)."""
        for pattern in self.patterns:
            for match in pattern.findall(line):
                for found in (match if isinstance(match, tuple) else (match,)):
                    if found and (not self.jwt or well_formed_jwt(found)):
                        yield found


@functools.cache
def rules() -> tuple[Rule, ...]:
    """Return the rules, from a cache when one matches the installed detect-secrets."""
    paths = cache_paths()
    found: tuple[Rule, ...] = ()
    for index, path in enumerate(paths):
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError, re.error):
            found = _read(path.read_text(encoding="utf-8"))
            if index > 0:  # also where a sandboxed kernel looks, when that can be written
                _write(paths[0], found)
            return found
    found = tuple(Rule(n, tuple(re.compile(p, f) for p, f in pats), j)
                  for n, pats, j in _from_package())
    for path in paths:
        if _write(path, found):
            break
    return found


def cached() -> bool:
    """Tell whether a cache of the rules exists (reading it is then cheap)."""
    return any(path.is_file() for path in cache_paths())


def cache_paths() -> list[Path]:
    """Return where the cache may be, in order: beside the Python environment (a sandboxed
    kernel sees it, read-only), then the user's cache folder."""
    name = _cache_name()
    if name is None:
        return []
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return [Path(sys.prefix) / "share" / "jupyter-ci" / name, Path(base) / "jupyter-ci" / name]


def _cache_name() -> str | None:
    """Name the cache file of the installed detect-secrets, or None when it is not found."""
    spec = importlib.util.find_spec("detect_secrets")  # finds, does not import
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    try:
        # A reinstall or upgrade changes these; the path tells two environments apart.
        stamp = [(p.name, p.stat().st_mtime_ns) for p in (package / "__version__.py",
                                                          package / "plugins")]
    except OSError:
        return None
    key = hashlib.sha256(json.dumps([str(package), stamp, _FORMAT]).encode()).hexdigest()[:16]
    return f"detect-secrets-{key}.json"


def _from_package() -> list[tuple[str, list[tuple[str, int]], bool]]:
    """Read the regex plugins' patterns out of detect-secrets itself (the slow import)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    found = []
    plugins: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    for plugin in plugins:
        if plugin.__name__ in SKIPPED_PLUGINS:
            continue
        patterns = [(p.pattern, p.flags) for p in getattr(plugin(), "denylist", ())
                    if isinstance(p.pattern, str)]
        found.append((plugin.__name__, patterns, plugin.__name__ == _JWT_PLUGIN))
    return found


def _read(text: str) -> tuple[Rule, ...]:
    data: Any = json.loads(text)
    if data.get("format") != _FORMAT or not data["rules"]:
        raise ValueError("not a rules cache of this version")
    return tuple(Rule(str(r["name"]), tuple(re.compile(str(p), int(f)) for p, f in r["patterns"]),
                      bool(r["jwt"])) for r in data["rules"])


def _write(path: Path, found: tuple[Rule, ...]) -> bool:
    """Write the cache atomically; say whether it could be (one that cannot is only slower)."""
    data = {"format": _FORMAT, "rules": [
        {"name": r.name, "patterns": [(p.pattern, p.flags) for p in r.patterns], "jwt": r.jwt}
        for r in found]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".rules-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from a kernel run as another user
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def well_formed_jwt(token: str) -> bool:
    """Tell whether `token` reads as a JWT: base64url parts, the first two JSON."""
    for index, part in enumerate(token.split(".")):
        if len(part) % 4 == 1:
            return False
        try:
            raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
            if index < 2:
                json.loads(raw.decode("utf-8"))
        except (binascii.Error, ValueError, UnicodeDecodeError):
            return False
    return True
