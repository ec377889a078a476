"""The ask record: who asked what, what it left in the notebook, and when it can be reused.

One module owns the record the browser keeps in the `%%ask` cell's metadata and the one
rule that finds an ask's generated cells (docs/protocol.md §4); labextension/src/cells.ts
implements the same rule, and tests/record_cases.json checks both sides.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jupyter_ci.agent.errors import RecordWouldFail
from jupyter_ci.agent.events import Outcome
from jupyter_ci.kernel.protocol import AskInfo, Raw, RequestInfo
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.names import METADATA_KEY
from jupyter_ci.wire.record import RECORD_VERSION, AskRecord, read_record

# Scanning is for headless runs of a notebook folder, not for crawling a whole disk.
MAX_NOTEBOOKS = 50
MAX_NOTEBOOK_BYTES = 20_000_000
MAX_SCAN_BYTES = 100_000_000  # read per ask, over all candidates


#: Hex digits of the prompt hash in a pin.
PIN_CHARS = 10


def record_of(ask: AskInfo, phash: str, outcome: Outcome) -> AskRecord:
    """Read an ask's outcome as its record (unsigned)."""
    answer = outcome.answer if outcome.error is None else str(outcome.error)
    ended = outcome.to_wire()
    return AskRecord(
        version=RECORD_VERSION, ask_id=ask.ask_id, prompt_hash=phash, model=ask.model,
        status=outcome.status, answer=answer, steps=outcome.steps, tokens=outcome.tokens,
        created=datetime.datetime.now(datetime.UTC).isoformat(),
        unresolved=ended.unresolved, edits=ended.edits or None, usage=ended.usage)


def signed(record: AskRecord, prompt: str) -> AskRecord:
    """Return the record signed by this user's kernel for `prompt` (the one place)."""
    from jupyter_ci.kernel.signing import signature

    return replace(record, signature=signature(encode(replace(record, signature=None)), prompt))


def verified(raw: Raw, prompt: str) -> bool:
    """Tell whether this user's kernel signed this metadata, as it was written, for `prompt`."""
    from jupyter_ci.kernel.signing import verify

    return verify(raw, prompt)


def _record_of(cell: object) -> Raw | None:
    """Return a cell's jupyter-ci metadata when it has an ask id (any other shape: None)."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    record = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    return record if isinstance(record, dict) and record.get("ask_id") else None


def _step_of(record: Raw | None) -> int | None:
    step = None if record is None else record.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def generated_after(cells: Sequence[object], index: int) -> list[int]:
    """Return the indices of the generated cells of the ask cell at `index` (the one rule).

    They are the later cells whose record has the ask's id and a step, in notebook order;
    other cells in between, and pasted copies of the ask cell (no step), are ignored. The
    steps must read 1, 2, ..., k; anything else (a gap, a repeat, a reordering) gives [].
    A generated cell has no generated cells.
    """
    record = _record_of(cells[index]) if 0 <= index < len(cells) else None
    if record is None or "step" in record:
        return []
    found = [i for i in range(index + 1, len(cells))
             if (r := _record_of(cells[i])) is not None and r["ask_id"] == record["ask_id"]
             and _step_of(r) is not None]
    steps = [_step_of(_record_of(cells[i])) for i in found]
    return found if steps == list(range(1, len(found) + 1)) else []


def pin_of(phash: str) -> str:
    """Return the `--pin` the labextension writes into an answered `%%ask` line.

    Runners other than JupyterLab send only the cell's source to the kernel, so the pin goes
    there: it says "answered for exactly this prompt, its generated cells follow", without
    the working directory or the notebook's path. It vouches for nothing else (no answer is
    taken from it): a forged one can only keep a headless run from asking.
    """
    return phash[:PIN_CHARS]


def prompt_hash(prompt: str, model_option: str | None) -> str:
    """Hash what makes an ask the same ask: its words and an explicitly chosen model."""
    payload = json.dumps([prompt.strip(), model_option or ""])
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Reuse:
    """What a re-run found: the record to reuse, if any."""

    record: AskRecord | None = None
    #: A finished record of this very ask was there, but this user's kernel did not sign it.
    unverified: bool = False


def would_fail(record: AskRecord, namespace: Mapping[str, Any]) -> RecordWouldFail | None:
    """Say why a record's cells would fail now: they read names only a lost run defined."""
    # Set when the ask ended "unresolved" because a step was never made self-contained.
    unresolved = record.unresolved
    missing = [n for n in unresolved.names if n not in namespace] if unresolved else []
    if not missing or unresolved is None:
        return None
    shown = ", ".join(f"`{n}`" for n in missing)
    return RecordWouldFail(
        f"The earlier answer of this ask is not reused: its step {unresolved.step} "
        f"reads {shown}, which no cell above defines, so its cells would fail here "
        f"({unresolved.error}).",
        "Run this cell with --refresh to ask again, or define it in a cell above.")


def reusable_from_request(info: RequestInfo, phash: str, prompt: str) -> Reuse:
    """Find the record when this user signed it and the browser shows all its cells."""
    record = read_record(info.record)
    if not info.has_frontend or record is None or not record.done_for(phash):
        return Reuse()
    if not verified(info.record or {}, prompt):
        return Reuse(unverified=True)  # not written by this user's kernel: ask the model
    generated = info.frontend.generated if info.frontend is not None else ()
    return Reuse(record if len(generated) == record.steps else None)


def notebook_candidates(cwd: Path) -> list[Path]:
    """List the notebooks that may be the one being executed, the named one alone if named."""
    from jupyter_ci.kernel.notebook_path import named_notebooks, runner_notebooks

    found = named_notebooks(cwd)
    if not found:
        # The runner's own arguments first: papermill may run a notebook of another folder.
        found = runner_notebooks() + sorted(cwd.glob("*.ipynb"))[:MAX_NOTEBOOKS]
    unique: list[Path] = []
    for path in found:
        if path.suffix == ".ipynb" and path.is_file() and path not in unique:
            unique.append(path)
    return unique


def _source(cell: Raw) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(line for line in source if isinstance(line, str))
    return str(source)


def _matching_records(cells: list[object], phash: str, code: str, cell_id: str | None
                      ) -> list[tuple[AskRecord, Raw]]:
    """Return the done records of this very cell (same source and id) with all its cells,
    each with the metadata it was read from (a signature covers that, as it was written)."""
    found = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            continue
        raw = _record_of(cell)
        record = read_record(raw)
        if (raw is not None and record is not None and record.done_for(phash)
                and _source(cell) == code and (cell_id is None or cell.get("id") == cell_id)
                and len(generated_after(cells, index)) == record.steps):
            found.append((record, raw))
    return found


def reusable_on_disk(phash: str, prompt: str, code: str, cwd: Path,
                     cell_id: str | None = None) -> Reuse:
    """Find this ask's signed done record in the notebook being executed (see README).

    The notebook is `$JUPYTER_CI_NOTEBOOK` (or the server's `JPY_SESSION_NAME`, or papermill's
    `PAPERMILL_INPUT_PATH`) when set, else one the runner's command line names or one in the
    working directory holding this exact cell (the same source, and the same
    cell id when the frontend sent one). The record must be signed by this user, or the
    notebook trusted with `jupyter trust`.
    """
    from jupyter_ci.kernel.signing import notebook_trusted

    budget, unverified = MAX_SCAN_BYTES, False
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
        records = _matching_records(cells, phash, code, cell_id) if isinstance(
            cells, list) else []
        mine = [record for record, written in records if verified(written, prompt)]
        if mine:
            return Reuse(mine[0])
        if records and notebook_trusted(raw):
            return Reuse(records[0][0])
        unverified = unverified or bool(records)
    return Reuse(unverified=unverified)
