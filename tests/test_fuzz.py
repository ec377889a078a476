"""Schemathesis against a live server: generated requests to every documented operation get no
5xx, and every reply (status, content type, body) conforms to the OpenAPI document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests import openapi_check
from tests.ui.lab import LabServer, start_lab

schema = schemathesis.openapi.from_dict(openapi_check.document())
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A real Jupyter server with jupyter-ci; few sessions, so generated creates stay cheap."""
    base = tmp_path_factory.mktemp("fuzz")
    (base / "config").mkdir()
    (base / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"JupyterCI": {"max_sessions": 2, "session_pool": 0, "max_upload_bytes": 4096}}))
    server = start_lab(base, {})
    yield server
    server.stop()


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_generated_requests_get_no_5xx_and_replies_follow_the_document(
    case: schemathesis.Case, live: LabServer
) -> None:
    response = case.call(base_url=live.url, headers={"Authorization": f"token {live.token}"},
                         timeout=60)
    case.validate_response(response, checks=CHECKS)
    assert Path(live.root).is_dir()
