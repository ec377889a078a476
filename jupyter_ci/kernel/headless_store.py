"""Answers of asks run headless, kept for the next headless run of the same cell.

A headless run (nbconvert, papermill, nbclient) shows an ask's steps inline and cannot write
into the notebook's source or metadata, and the next run sends the kernel only the source.
So the kernel keeps the answer and each step's final code itself, in this user's Jupyter data
directory, keyed by a hash of the cell's whole source (prompt and options). The next headless
run of that source replays the steps (each runs once, the model is not asked) and shows the
answer. Entries are signed with the user's record secret (see signing.py): one written or
edited by anyone else is ignored.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from jupyter_ci.kernel.signing import mac, mac_ok

VERSION = 1


def store_dir() -> Path:
    """Return where the entries live (beside the record secret)."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "jupyter_ci" / "headless"


def key_of(source: str) -> str:
    """Name the entry of a cell by its whole source."""
    return hashlib.sha256(source.strip().encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _body(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, sort_keys=True, ensure_ascii=False).encode()


def save(source: str, model: str, answer: str, steps: list[str]) -> None:
    """Keep a finished headless ask for the next run of the same cell (best effort)."""
    entry = {"version": VERSION, "key": key_of(source), "model": model, "answer": answer,
             "steps": steps,
             "created": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    signature = mac(_body(entry))
    if signature is None:
        return  # no private secret: nothing could be verified later either
    folder = store_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".entry-")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump({"entry": entry, "signature": signature}, file)
        os.replace(tmp, folder / f"{entry['key']}.json")
    except OSError:
        return  # a read-only data dir: the next run asks again


def load(source: str) -> dict[str, Any] | None:
    """Return the kept ask of this exact cell source, if this user's kernel wrote it."""
    key = key_of(source)
    try:
        stored = json.loads((store_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = stored.get("entry") if isinstance(stored, dict) else None
    if not isinstance(entry, dict) or not mac_ok(_body(entry), stored.get("signature")):
        return None
    steps = entry.get("steps")
    if entry.get("key") != key or not isinstance(steps, list) or \
            not all(isinstance(step, str) for step in steps):
        return None
    return entry
