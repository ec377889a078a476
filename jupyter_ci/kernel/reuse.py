"""Decide whether a re-run %%ask cell can reuse its earlier answer (docs/protocol.md §4)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORD_VERSION = 1
# Scanning is for headless runs of a notebook folder, not for crawling a whole disk.
MAX_NOTEBOOKS = 50
MAX_NOTEBOOK_BYTES = 20_000_000
MAX_SCAN_BYTES = 100_000_000  # read per ask, over all candidates


@dataclass(frozen=True)
class RequestInfo:
    """What the frontend sent with this cell's execute_request."""

    cell_id: str | None
    record: dict[str, Any] | None
    frontend: dict[str, Any] | None

    @property
    def has_frontend(self) -> bool:
        """Tell whether the jupyter-ci labextension sent this request."""
        return self.frontend is not None and self.frontend.get("protocol") == 1


def request_info(parent: dict[str, Any]) -> RequestInfo:
    """Read the cell id, ask record and frontend announcement from a request's metadata."""
    meta = parent.get("metadata") or {}
    record = meta.get("jupyter_ci")
    frontend = meta.get("jupyter_ci_frontend")
    return RequestInfo(
        cell_id=meta.get("cellId") if isinstance(meta.get("cellId"), str) else None,
        record=record if isinstance(record, dict) else None,
        frontend=frontend if isinstance(frontend, dict) else None,
    )


def prompt_hash(prompt: str, model_option: str | None) -> str:
    """Hash what makes an ask the same ask: its words and an explicitly chosen model."""
    payload = json.dumps([prompt.strip(), model_option or ""])
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _done(record: dict[str, Any] | None, phash: str) -> bool:
    if record is None:
        return False
    return bool(record.get("status") == "done" and record.get("prompt_hash") == phash)


def reusable_from_request(info: RequestInfo, phash: str) -> dict[str, Any] | None:
    """Return the record when the browser shows the finished ask's cells are all there."""
    if not info.has_frontend or not _done(info.record, phash):
        return None
    assert info.record is not None and info.frontend is not None
    generated = info.frontend.get("generated") or []
    return info.record if len(generated) == info.record.get("steps") else None


def notebook_candidates(cwd: Path) -> list[Path]:
    """List notebooks that may hold this kernel's cells, most specific first."""
    named = [os.environ.get("JUPYTER_CI_NOTEBOOK"), os.environ.get("JPY_SESSION_NAME")]
    found = [Path(p) if Path(p).is_absolute() else cwd / p for p in named if p]
    found += sorted(cwd.glob("*.ipynb"))[:MAX_NOTEBOOKS]
    unique: list[Path] = []
    for path in found:
        if path.suffix == ".ipynb" and path.is_file() and path not in unique:
            unique.append(path)
    return unique


def _generated_follow(cells: list[dict[str, Any]], index: int, record: dict[str, Any]) -> bool:
    ask_id, steps = record.get("ask_id"), record.get("steps", 0)
    following = cells[index + 1 : index + 1 + steps]
    return len(following) == steps and all(
        (cell.get("metadata") or {}).get("jupyter_ci", {}).get("ask_id") == ask_id
        for cell in following
    )


def reusable_on_disk(phash: str, cwd: Path) -> dict[str, Any] | None:
    """Find, in a saved notebook, this ask's done record with its generated cells after it."""
    budget = MAX_SCAN_BYTES
    for path in notebook_candidates(cwd):
        try:
            size = path.stat().st_size
            if size > min(MAX_NOTEBOOK_BYTES, budget):
                continue
            budget -= size
            raw = path.read_bytes()
            # Parse only notebooks that mention this ask: most in a folder do not.
            if phash.encode() not in raw:
                continue
            cells = json.loads(raw).get("cells", [])
        except (OSError, ValueError, AttributeError):
            continue  # an unreadable notebook simply isn't a match
        for index, cell in enumerate(cells):
            record = (cell.get("metadata") or {}).get("jupyter_ci")
            if isinstance(record, dict) and _done(record, phash) and _generated_follow(
                cells, index, record
            ):
                return record
    return None
