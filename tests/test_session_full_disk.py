"""An upload that fills the session's disk: a clear 507, and no temporary file left behind.

The session root is a 1 MiB tmpfs (mounted as root). Where mounting is refused (not root, a
container without CAP_SYS_ADMIN) the same fault is made by a file-size limit on the server's
process (RLIMIT_FSIZE, SIGXFSZ ignored), which the system reports as EFBIG: a 413 then.
"""

from __future__ import annotations

import contextlib
import json
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError, HTTPResponse
from traitlets.config import Config

from tests import openapi_check

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs, rlimits")
SIZE = 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[tuple[Path, bool]]:
    """A 1 MiB tmpfs when mounting works (True), else a plain folder (False)."""
    root = tmp_path / "small"
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(root)],
                             capture_output=True, check=False).returncode == 0
    try:
        yield root, mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(root)], check=False)


@pytest.fixture
def jp_server_config(small_disk: tuple[Path, bool]) -> Config:
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": {"session_pool": 0, "session_sandbox": "never",
                                 "session_root": str(small_disk[0])}})


async def call(jp_fetch: Any, method: str, *path: str, body: Any = None,
               raw: bytes | None = None) -> tuple[int, Any]:
    """Call a session route (a 507 included); check the reply against the document."""
    data = raw if raw is not None else json.dumps(body).encode() if body is not None else None
    try:
        response: HTTPResponse = await jp_fetch("jupyter-ci", "sessions", *path, method=method,
                                                body=data)
    except HTTPClientError as err:
        assert err.response is not None
        response = err.response
    content = response.body or b""
    openapi_check.check(method, response.effective_url, response.code,
                        response.headers.get("Content-Type", ""), content)
    return response.code, json.loads(content) if content else None


@contextlib.contextmanager
def file_size_limit(mounted: bool) -> Iterator[None]:
    """Without a small disk, let this process write no file past SIZE bytes."""
    if mounted:
        yield
        return
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG rather than death
    resource.setrlimit(resource.RLIMIT_FSIZE, (SIZE, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, before)
        signal.signal(signal.SIGXFSZ, handler)


async def test_an_upload_that_fills_the_disk_is_a_507_and_leaves_no_temp_file(
    jp_fetch: Any, small_disk: tuple[Path, bool]
) -> None:
    _, mounted = small_disk
    status, session = await call(jp_fetch, "POST", body={})
    assert status == 201, session
    directory = Path(session["cwd"])
    try:
        with file_size_limit(mounted):
            status, body = await call(jp_fetch, "PUT", session["id"], "files", "big.bin",
                                      raw=b"x" * (3 * SIZE))
        assert (status, body["reason"]) == ((507, "insufficient_storage") if mounted else (
            413, "upload_too_large")), body
        assert "big.bin" in body["message"] and "Nothing was kept" in body["message"]
        assert sorted(p.name for p in directory.iterdir()) == []  # no .upload-* file
        # The session goes on: a small upload fits.
        status, body = await call(jp_fetch, "PUT", session["id"], "files", "small.txt",
                                  raw=b"fits")
        assert status == 201, body
    finally:
        await call(jp_fetch, "DELETE", session["id"])
