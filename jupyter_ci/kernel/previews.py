"""Preview the data files a prompt names: columns, dtypes and first rows, bounded and safe.

Read with pandas when the kernel has it, only the first rows of files read in pieces (CSV,
JSON lines, Parquet) and only small files of formats parsed whole (JSON, Excel). A file that
cannot be read says so; it never fails the ask.
"""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jupyter_ci.agent.secrets import REDACTED, is_secret_name, redact

KINDS = {".csv": "CSV", ".tsv": "TSV", ".json": "JSON", ".jsonl": "JSON lines",
         ".ndjson": "JSON lines", ".xlsx": "Excel", ".xls": "Excel", ".parquet": "Parquet",
         ".pq": "Parquet"}
_MB = 1024 * 1024
#: Largest file previewed, by how it is read: in pieces (first rows only), or parsed whole.
MAX_BYTES = {"pieces": 50 * _MB, "whole": 5 * _MB}
_WHOLE = frozenset({"JSON", "Excel"})
#: Characters of one file's preview, and of all previews of one ask together.
PREVIEW_CHARS = 1_500
TOTAL_CHARS = 4_500
#: Named files looked at per ask.
MAX_PREVIEWS = 5
ROWS = 5
#: Rows read to infer column types; never more of a file than this.
INFER_ROWS = 1_000
_MAX_COLUMNS = 30
_QUOTED = re.compile(r"[\"'`]([^\"'`\n]{1,300})[\"'`]")
_WORD = re.compile(r"[^\s\"'`,;()\[\]{}<>]+")
_SUBFOLDER_SCAN = 200


def previews_section(prompt: str, folder: str) -> str:
    """Preview each data file the prompt names (by name or path), within TOTAL_CHARS."""
    parts: list[str] = []
    used = 0
    for path, label in named_files(prompt, folder):
        text = preview(path, label) if used + PREVIEW_CHARS <= TOTAL_CHARS else (
            f"{label}: not previewed, the previews of this ask are long enough already")
        parts.append(text)
        used += len(text)
    return "\n\n".join(parts)


def named_files(prompt: str, folder: str) -> list[tuple[Path, str]]:
    """Find the data files the prompt names, as (path, name as written), without repeats."""
    found: list[tuple[Path, str]] = []
    seen: set[str] = set()
    for name in _candidates(prompt):
        path = _locate(name, folder)
        if path is None:
            continue
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            found.append((path, name))
        if len(found) >= MAX_PREVIEWS:
            break
    return found


def _candidates(prompt: str) -> list[str]:
    """Return quoted strings and words of the prompt that end in a data file's suffix."""
    names = [m.group(1).strip() for m in _QUOTED.finditer(prompt)]
    names += [m.group(0).rstrip(".:!?") for m in _WORD.finditer(prompt)]
    return [n for n in names if os.path.splitext(n)[1].lower() in KINDS]


def _locate(name: str, folder: str) -> Path | None:
    """Find a named file: as a path from the working folder, else in a subfolder of it."""
    path = Path(name).expanduser()
    path = path if path.is_absolute() else Path(folder) / path
    if _is_file(path):
        return path
    if "/" in name or os.sep in name:
        return None
    # An upload lands in a subfolder (the panel's data/): "sales.csv" means data/sales.csv.
    try:
        with os.scandir(folder) as entries:
            subfolders = sorted(e.path for e in itertools.islice(entries, _SUBFOLDER_SCAN)
                                if not e.name.startswith(".") and e.is_dir())
    except OSError:
        return None
    return next((Path(d) / name for d in subfolders if _is_file(Path(d) / name)), None)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def human_size(size: float) -> str:
    """Give a size in bytes in human units."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def preview(path: Path, label: str) -> str:
    """Describe one data file in at most PREVIEW_CHARS characters; never raise."""
    kind = KINDS[path.suffix.lower()]
    try:
        size = path.stat().st_size
    except OSError as exc:
        return f"{label}: could not preview: {exc.strerror or type(exc).__name__}"
    head = f"{label} ({kind}, {human_size(size)})"
    limit = MAX_BYTES["whole" if kind in _WHOLE else "pieces"]
    if size > limit:
        return f"{head}: not previewed, over the {limit // _MB} MB preview limit for {kind} files"
    try:
        body = _READERS[kind](path)
    except Exception as exc:
        # An OSError names the absolute path: the model gets the file as the prompt named it.
        message = (str(exc).replace(str(path), label).strip().splitlines() or [""])[0][:200]
        return redact(f"{head}: could not preview: {type(exc).__name__}: {message}")
    return _cap(redact(f"{head}\n{body}"), PREVIEW_CHARS)


def _cap(text: str, limit: int) -> str:
    """Keep the head of a preview, cut at a line, within limit characters."""
    if len(text) <= limit:
        return text
    marker = "\n… (preview cut)"
    cut = text.rfind("\n", 0, limit - len(marker))
    return text[:cut if cut > 0 else limit - len(marker)] + marker


def _pandas() -> Any:
    """Return pandas if the kernel has it, else None (it is imported only when needed)."""
    if importlib.util.find_spec("pandas") is None:
        return None
    import pandas

    return pandas


def frame_text(frame: Any, rows_note: str = "") -> str:
    """Describe a DataFrame: its columns with dtypes, then its first rows."""
    dtypes = frame.dtypes.iloc[:_MAX_COLUMNS]
    columns = ", ".join(f"{c} ({t})" for c, t in zip(dtypes.index, dtypes, strict=True))
    more = f", … {frame.shape[1] - _MAX_COLUMNS} more" if frame.shape[1] > _MAX_COLUMNS else ""
    head = frame.head(ROWS).copy()
    for i, column in enumerate(head.columns):
        if isinstance(column, str) and is_secret_name(column):
            head.isetitem(i, [REDACTED] * len(head))
    lines = [rows_note] if rows_note else []
    lines.append(f"columns ({frame.shape[1]}): {columns}{more}")
    lines += [f"first {min(ROWS, len(frame))} rows:",
              head.to_string(max_cols=12, max_colwidth=30)]
    return "\n".join(lines)


def _sniff(path: Path) -> str:
    """Guess a CSV file's delimiter from its start; a comma when unsure."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        sample = f.read(64 * 1024)
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def _read_csv(path: Path) -> str:
    sep = "\t" if path.suffix.lower() == ".tsv" else _sniff(path)
    pd = _pandas()
    if pd is None:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            lines = [line.rstrip("\r\n") for line in itertools.islice(f, ROWS + 1)]
        return "header and first rows (pandas is not installed):\n" + "\n".join(lines)
    frame = pd.read_csv(path, sep=sep, nrows=INFER_ROWS, encoding_errors="replace")
    note = f"separator {sep!r}" if sep != "," else ""
    return frame_text(frame, note)


def _read_json_lines(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        records = [json.loads(line) for line in itertools.islice(f, INFER_ROWS) if line.strip()]
    pd = _pandas()
    if pd is None or not all(isinstance(r, dict) for r in records):
        return "first lines:\n" + "\n".join(json.dumps(r)[:300] for r in records[:ROWS])
    return frame_text(pd.DataFrame.from_records(records))


def _read_json(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        data = json.load(f)
    records, where = _records(data)
    pd = _pandas()
    if records is not None and pd is not None:
        frame = pd.DataFrame.from_records(records[:INFER_ROWS])
        count = len(records)
        return frame_text(frame, f"{where}{count:,} record{'s' * (count != 1)}")
    if isinstance(data, dict) and pd is not None and _columnar(data):
        return frame_text(pd.DataFrame(data), "an object of equal-length columns")
    shape = (f"an object with keys: {', '.join(map(str, itertools.islice(data, 30)))}"
             if isinstance(data, dict) else
             f"an array of {len(data):,} items" if isinstance(data, list) else
             f"a single {type(data).__name__}")
    return f"{shape}\nstart: {json.dumps(data)[:600]}"


def _records(data: Any) -> tuple[list[Any] | None, str]:
    """Find a list of objects: the document itself, or the first key holding one."""
    if _is_records(data):
        return data, ""
    if isinstance(data, dict):
        for key, value in itertools.islice(data.items(), 30):
            if _is_records(value):
                return value, f'under key "{key}": '
    return None, ""


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(item, dict) for item in value[:INFER_ROWS])


def _columnar(data: Mapping[str, object]) -> bool:
    lengths = {len(v) for v in data.values() if isinstance(v, list)}
    return bool(data) and len(lengths) == 1 and all(isinstance(v, list) for v in data.values())


def _read_excel(path: Path) -> str:
    pd = _pandas()
    if pd is None:
        raise ImportError("pandas is not installed")
    with pd.ExcelFile(path) as book:
        sheets = [str(s) for s in book.sheet_names]
        frame = pd.read_excel(book, sheet_name=0, nrows=INFER_ROWS)
    return frame_text(frame, f"sheets: {', '.join(sheets[:20])} (first shown)")


def _read_parquet(path: Path) -> str:
    if importlib.util.find_spec("pyarrow") is None:
        raise ImportError("pyarrow is not installed")
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    rows = file.metadata.num_rows
    batch = next(file.iter_batches(batch_size=ROWS), None)
    if batch is None or _pandas() is None:
        return f"{rows:,} rows\nschema:\n{file.schema_arrow}"
    return frame_text(batch.to_pandas(), f"{rows:,} rows")


_READERS: dict[str, Callable[[Path], str]] = {
    "CSV": _read_csv, "TSV": _read_csv, "JSON": _read_json, "JSON lines": _read_json_lines,
    "Excel": _read_excel, "Parquet": _read_parquet,
}
