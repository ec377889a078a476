"""detect-secrets' regex rules, read from a cache so a kernel's first ask does not import it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_ci import secret_rules
from jupyter_ci.agent.secrets import redact

AWS = "AKIAIOSFODNN7EXAMPLE"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
       "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")


@pytest.fixture
def caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Point both cache places at empty folders; forget the rules this process read."""
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    secret_rules.rules.cache_clear()
    yield secret_rules.cache_paths()
    secret_rules.rules.cache_clear()


def test_the_cache_holds_detect_secrets_own_rules(caches: list[Path]) -> None:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    first = secret_rules.rules()  # from the package: writes the cache beside the environment
    assert caches[0].is_file() and not caches[1].exists()
    secret_rules.rules.cache_clear()
    again = secret_rules.rules()  # from the cache
    assert [(r.name, [p.pattern for p in r.patterns]) for r in again] == [
        (r.name, [p.pattern for p in r.patterns]) for r in first]
    names = {p.__name__ for p in get_mapping_from_secret_type_to_class().values()}
    assert {r.name for r in again} == names - secret_rules.SKIPPED_PLUGINS
    assert AWS in {s for r in again for s in r.find(f"key = {AWS}")}


def test_a_cache_that_lost_its_rules_is_not_believed(caches: list[Path]) -> None:
    # Emptied by hand, or by code that wants its keys to pass unredacted: read from the package.
    caches[0].parent.mkdir(parents=True)
    caches[0].write_text(json.dumps({"format": 1, "rules": []}))
    assert len(secret_rules.rules()) > 10
    assert "[redacted]" in redact(f"aws_key: {AWS}")


def test_jwts_are_judged_as_detect_secrets_judges_them() -> None:
    from detect_secrets.plugins.jwt import JwtTokenDetector

    for token in (JWT, "eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.sig", "eyJ4Ijp9.e30.",
                  "eyJhbGciOiJub25lIn0.e30"):
        assert secret_rules.well_formed_jwt(token) == JwtTokenDetector.is_formally_valid(token)


def test_load_ext_reads_the_cache_and_the_first_redaction_imports_no_detect_secrets(
        caches: list[Path], tmp_path: Path) -> None:
    secret_rules.rules()  # as the server does when it starts
    code = ("import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
            "InteractiveShell.instance().run_line_magic('load_ext', 'jupyter_ci')\n"
            "from jupyter_ci.agent.secrets import redact\n"
            f"print(redact('key = {AWS}'), sorted({{'detect_secrets', 'requests'}} "
            "& set(sys.modules)))")
    env = {"XDG_CACHE_HOME": str(tmp_path / "user"), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}
    # The box's view: the cache beside the environment, read-only, no user cache.
    out = subprocess.run([sys.executable, "-c", code.replace(
        "import sys\n", f"import sys\nsys.prefix = {str(caches[0].parents[2])!r}\n", 1)],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=True).stdout
    assert out.strip() == "key = [redacted] []"
