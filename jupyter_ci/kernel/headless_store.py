"""Answers of asks run headless, kept for the next headless run of the same cell.

A headless run (nbconvert, papermill, nbclient) shows an ask's steps inline and cannot write
into the notebook's source or metadata, and the next run sends the kernel only the source.
So the kernel keeps each step's final code itself, in this user's Jupyter data directory,
keyed by a hash of the cell's whole source (prompt and options). The next headless run of
that source runs the steps again (the model is not asked for code).

An answer is true only of the outputs it was written from, so each kept answer carries a
digest of the notebook it was written in and of each step's outputs (text as the model saw
them); it is shown again only where both still match (rerun.py). A few answers are kept per
cell (a parameterised notebook's runs each have their own). Entries are signed with the
user's record secret (see signing.py): one written or edited by anyone else is ignored.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from jupyter_ci.kernel.signing import mac, mac_ok
from jupyter_ci.wire.names import DATA_FOLDER

VERSION = 2
#: Answers kept per cell source, newest last (one per notebook and outputs).
MAX_ANSWERS = 8


@dataclass(frozen=True)
class KeptAnswer:
    """An answer, and digests of what it was written from."""

    answer: str
    model: str
    #: Digest of the notebook's identity (rerun.notebook_identity).
    notebook: str
    #: Digest of each step's outputs; "" is not compared (an install's pip log varies).
    outputs: tuple[str, ...]
    created: str = ""

    def describes(self, notebook: str, outputs: tuple[str, ...]) -> bool:
        """Tell whether this answer was written in this notebook from these outputs."""
        return (self.notebook == notebook and len(self.outputs) == len(outputs)
                and all(kept in ("", now) for kept, now in zip(self.outputs, outputs, strict=True)))


@dataclass(frozen=True)
class Kept:
    """What headless runs of one cell left: its steps' code and the answers written for them."""

    steps: tuple[str, ...]
    answers: tuple[KeptAnswer, ...]

    def answer_for(self, notebook: str, outputs: tuple[str, ...]) -> KeptAnswer | None:
        """Return the newest answer written in this notebook from these outputs."""
        return next((a for a in reversed(self.answers) if a.describes(notebook, outputs)),
                    None)


def now() -> str:
    """Return the time, as entries keep it."""
    return datetime.datetime.now(datetime.UTC).isoformat()


def store_dir() -> Path:
    """Return where the entries live (beside the record secret)."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / DATA_FOLDER / "headless"


def key_of(source: str) -> str:
    """Name the entry of a cell by its whole source."""
    return hashlib.sha256(source.strip().encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _body(entry: Mapping[str, object]) -> bytes:
    return json.dumps(entry, sort_keys=True, ensure_ascii=False).encode()


def save(source: str, steps: list[str], answer: KeptAnswer) -> None:
    """Keep a headless ask's steps and answer for the next run of the same cell (best effort)."""
    kept = load(source)
    others = [] if kept is None or list(kept.steps) != steps else [
        a for a in kept.answers if (a.notebook, a.outputs) != (answer.notebook, answer.outputs)]
    answers = [*others, answer][-MAX_ANSWERS:]
    entry = {"version": VERSION, "key": key_of(source), "steps": steps,
             "answers": [asdict(a) for a in answers]}
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


def load(source: str) -> Kept | None:
    """Return what was kept of this exact cell source, if this user's kernel wrote it."""
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
    return Kept(tuple(steps), tuple(_answers(entry)))


def _answers(entry: Mapping[str, object]) -> list[KeptAnswer]:
    """Read the kept answers; version 1 kept one, with nothing to tell what it describes."""
    if entry.get("version") == 1:
        return [KeptAnswer(str(entry.get("answer", "")), str(entry.get("model", "")), "", (),
                           str(entry.get("created", "")))]
    found = []
    items = entry.get("answers")
    for item in items if isinstance(items, list) else []:
        outputs = item.get("outputs") if isinstance(item, dict) else None
        if isinstance(outputs, list) and all(isinstance(o, str) for o in outputs):
            found.append(KeptAnswer(str(item.get("answer", "")), str(item.get("model", "")),
                                    str(item.get("notebook", "")), tuple(outputs),
                                    str(item.get("created", ""))))
    return found
