"""A kernel that exits as it starts is said to have exited, at once (issue 24.14)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

from tests.nbrun import session_server_config
from tests.test_sessions import Fetch


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Config:
    """The extension, unboxed, with a kernelspec whose kernel exits at once."""
    spec = tmp_path / "share" / "kernels" / "exits"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-c", "import sys; sys.exit(3)", "{connection_file}"],
        "display_name": "exits at once", "language": "python"}))
    config = session_server_config(monkeypatch, {})
    config.JupyterCI.session_sandbox = "never"
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share"))
    return config


async def test_a_kernel_that_exits_at_start_says_so_not_a_timeout(jp_fetch: Fetch) -> None:
    started = time.monotonic()
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("jupyter-ci", "sessions", method="POST",
                       body=json.dumps({"kernel_name": "exits"}))
    took = time.monotonic() - started
    response = refused.value.response
    assert response is not None and response.code == 503
    reply = json.loads(response.body)
    assert "exited as it started" in reply["message"], reply
    assert "within 60 s" not in reply["message"]
    assert took < 30
