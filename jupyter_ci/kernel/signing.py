"""Sign ask records with a per-user secret, so a notebook from someone else cannot supply answers.

A record in a cell's metadata claims "this ask is done, here is its answer"; reuse believes
it only when this user's kernel wrote it (an HMAC with a per-user secret, as
nbformat.sign.NotebookNotary signs trusted notebooks) or, headless, when the user trusted the
whole notebook (`jupyter trust`).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_ci.record_secret import SECRET_BYTES, ensure, secret_path

SCHEME = "hmac-sha256"
#: The fields a signature covers (what reuse shows and decides on), with the prompt itself.
SIGNED_FIELDS = ("version", "ask_id", "prompt_hash", "model", "status", "answer", "steps",
                 "tokens", "created")
log = logging.getLogger(__name__)


def _private(path: Path) -> bool:
    """Tell a file only its owner (this user) can read or write."""
    info = path.stat()
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)


@functools.cache
def _secret_at(path: Path) -> bytes | None:
    """Read the secret at `path`, creating it (0600, atomically) on first use; None if unsafe."""
    try:
        ensure(path)
        if not _private(path):
            # Someone else could read it and sign records for us: sign nothing.
            log.warning("jupyter-ci: %s is readable by others; asks will not be reused until "
                        "you run `chmod 600 %s`", path, path)
            return None
        data = path.read_bytes()
    except OSError as exc:
        log.warning("jupyter-ci: cannot use %s (%s); asks will not be reused", path, exc)
        return None
    return data if len(data) >= SECRET_BYTES else None


def _payload(record: Mapping[str, object], prompt: str) -> bytes:
    """Serialise what a signature covers, the same way every time."""
    fields = {name: record.get(name) for name in SIGNED_FIELDS}
    return json.dumps([fields, prompt.strip()], sort_keys=True, ensure_ascii=False).encode()


def signature(record: Mapping[str, object], prompt: str) -> str | None:
    """Return this user's signature of a record for `prompt` (None: there is no secret)."""
    key = _secret_at(secret_path())
    if key is None:
        return None
    return f"{SCHEME}:{hmac.new(key, _payload(record, prompt), hashlib.sha256).hexdigest()}"


def sign(record: Mapping[str, object], prompt: str) -> dict[str, object]:
    """Return the record with this user's signature added (unchanged if there is no secret)."""
    found = signature(record, prompt)
    return {**record} if found is None else {**record, "signature": found}


def verify(record: Mapping[str, object], prompt: str) -> bool:
    """Tell whether this user's kernel signed this record for this exact prompt."""
    signature = record.get("signature")
    if not isinstance(signature, str) or not signature.startswith(f"{SCHEME}:"):
        return False
    key = _secret_at(secret_path())
    if key is None:
        return False
    expected = hmac.new(key, _payload(record, prompt), hashlib.sha256).hexdigest()
    return hmac.compare_digest(signature.removeprefix(f"{SCHEME}:"), expected)


def mac(data: bytes) -> str | None:
    """Return this user's signature of arbitrary bytes, or None when there is no secret."""
    key = _secret_at(secret_path())
    if key is None:
        return None
    return f"{SCHEME}:{hmac.new(key, data, hashlib.sha256).hexdigest()}"


def mac_ok(data: bytes, signature: object) -> bool:
    """Tell whether `signature` is this user's signature of `data`."""
    expected = mac(data)
    return isinstance(signature, str) and expected is not None and \
        hmac.compare_digest(signature, expected)


def notebook_trusted(raw: bytes) -> bool:
    """Tell whether the user trusted this whole notebook (`jupyter trust`, nbformat's notary)."""
    try:
        import nbformat.sign

        api: Any = nbformat  # nbformat is untyped
        notebook = api.reads(raw.decode(), as_version=4)
        return bool(api.sign.NotebookNotary().check_signature(notebook))
    except Exception:  # an unreadable notebook or notary database is simply not trusted
        return False
