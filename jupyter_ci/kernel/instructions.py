"""The user's standing instructions: the setting, and AGENTS.md files by the notebook."""

from __future__ import annotations

from pathlib import Path

#: File names read in each folder, in this order.
NAMES = ("AGENTS.md", ".jupyter-ci.md")
#: Characters read from one file, and from all of them together.
MAX_FILE_CHARS = 20_000
MAX_CHARS = 40_000


def instruction_files(folder: Path | None, home: Path | None = None) -> list[Path]:
    """Return the instruction files of `folder` and the folders above it, outermost first.

    The walk stops at the user's home folder (included) or at the root: instructions above
    home belong to someone else. Nearer files come later, so they have the last word.
    """
    if folder is None:
        return []
    home = home if home is not None else _home()
    found: list[Path] = []
    for place in [folder, *folder.parents]:
        for name in reversed(NAMES):
            path = place / name
            if path.is_file():
                found.append(path)
        if home is not None and place == home:
            break
    return found[::-1]


def standing_instructions(setting: str, folder: Path | None, home: Path | None = None) -> str:
    """Return the setting's instructions, then each file's under its own name, capped."""
    parts = [setting.strip()] if setting.strip() else []
    for path in instruction_files(folder, home):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:MAX_FILE_CHARS]
        except OSError:
            continue
        if text.strip():
            parts.append(f"From {path}:\n{text.strip()}")
    joined = "\n\n".join(parts)
    if len(joined) > MAX_CHARS:
        joined = joined[:MAX_CHARS] + "\n[… instructions cut: too long …]"
    return joined


def _home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:  # no home folder known
        return None
