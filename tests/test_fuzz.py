"""Schemathesis against a live server: generated requests to every documented operation get no
5xx, and every reply (status, content type, body) conforms to the OpenAPI document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
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


# One test per operation, each with a node id of its own (schemathesis's own parametrize
# gives them one id, which pytest-xdist runs once for all).
OPERATIONS = [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_generated_requests_get_no_5xx_and_replies_follow_the_document(
    operation: Any, live: LabServer
) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    def call(case: schemathesis.Case) -> None:
        response = case.call(base_url=live.url, timeout=60,
                             headers={"Authorization": f"token {live.token}"})
        case.validate_response(response, checks=CHECKS)

    call()
    assert Path(live.root).is_dir()
