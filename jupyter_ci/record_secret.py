"""The per-user secret that signs ask records: where it lives, made once (0600, atomically).

Both the kernel (which signs) and the server (which binds the file into a notebook's box
read-only, before the kernel could make it) need it to exist first.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from jupyter_ci.wire.names import DATA_FOLDER, RECORD_SECRET

SECRET_BYTES = 32


def secret_path() -> Path:
    """Return where this user's record secret lives (beside Jupyter's own notary secret)."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / DATA_FOLDER / RECORD_SECRET


def ensure(path: Path) -> None:
    """Make the secret at `path` unless it is there (OSError when it cannot be made)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as file:
        file.write(secrets.token_bytes(SECRET_BYTES))
