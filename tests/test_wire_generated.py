"""The files scripts/gen_wire.py writes from the wire classes are the ones committed."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "scripts" / "gen_wire.py"


def gen_wire() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))  # as `python scripts/gen_wire.py` has it (gen_shapes)
    spec = importlib.util.spec_from_file_location("gen_wire", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_files_are_what_the_wire_classes_say() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_stale_generated_file_is_named_with_the_command_that_fixes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    script = gen_wire()
    for name in ("TS", "DOCS", "OPENAPI", "SHAPES"):
        copy = tmp_path / Path(getattr(script, name)).name
        shutil.copy(getattr(script, name), copy)
        monkeypatch.setattr(script, name, copy)
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["gen_wire.py", "--check"])
    assert script.main() == 0
    # A field added by hand to the TypeScript twin (not to the wire class) is caught.
    ts = script.TS.read_text().replace("  delta: string;", "  delta: string;\n  tone: string;")
    script.TS.write_text(ts)
    assert script.main() == 1
    said = capsys.readouterr().out
    assert "protocol.generated.ts differs" in said and "python scripts/gen_wire.py" in said
    monkeypatch.setattr(sys, "argv", ["gen_wire.py"])
    assert script.main() == 0 and "tone" not in script.TS.read_text()
    # The client's dict twins too: one edited by hand is named and written back.
    script.SHAPES.write_text(script.SHAPES.read_text().replace("    mime: str\n", ""))
    monkeypatch.setattr(sys, "argv", ["gen_wire.py", "--check"])
    assert script.main() == 1 and "shapes.py differs" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["gen_wire.py"])
    assert script.main() == 0 and "    mime: str\n" in script.SHAPES.read_text()
