"""A tiny wheel made on the spot, for installs that reach no package index."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

PACKAGE = "jci_demo_pkg"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def demo_wheel(folder: Path) -> Path:
    """Write a minimal pure-Python wheel of `jci_demo_pkg` (what `pip wheel` would make)."""
    dist = f"{PACKAGE}-0.1.dist-info"
    files = {
        f"{PACKAGE}/__init__.py": b"VALUE = 42\n",
        f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: jci-demo-pkg\nVersion: 0.1\n",
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: jupyter-ci tests\n"
                         b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in files.items()] + [f"{dist}/RECORD,,"]
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{PACKAGE}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return wheel
