"""The OpenAPI document: valid 3.1, served as shipped, and in step with the routes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from openapi_spec_validator import validate
from traitlets.config import Config

from tests import openapi_check


@pytest.fixture
def jp_server_config() -> Config:
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": {"session_pool": 0}})


def test_the_document_is_valid_openapi_3_1() -> None:
    document = openapi_check.document()
    validate(document)
    assert document["openapi"].startswith("3.1")


async def test_the_server_serves_the_document_and_every_route_is_in_it(
    jp_fetch: Any, jp_serverapp: Any
) -> None:
    served = json.loads((await jp_fetch("jupyter-ci", "openapi.json")).body)
    assert served == openapi_check.document()
    from jupyter_ci.config import JupyterCI
    from jupyter_ci.server.handlers import routes

    service = jp_serverapp.web_app.settings["jupyter_ci_service"]
    table = routes(JupyterCI(), service, None, None, None, None)  # type: ignore[arg-type]
    # The kernels' model service and the page's own routes (config, keys, what ran in a
    # kernel, the user's spending under a JupyterHub: docs/protocol.md section 3) are not in it.
    panel = ("broker", "config", "keys", "model-code", "spending")
    patterns = [p for p, _, _ in table if not any(word in p for word in panel)]
    documented = {re.sub(r"\{(\w+)\}", "X", path) for path in served["paths"]}
    served_routes = {re.sub(r"\(\?P<\w+>[^)]+\)", "X", p).split("/jupyter-ci/", 1)[1]
                     for p in patterns}
    assert {"/jupyter-ci/" + r for r in served_routes} == documented


def test_a_reply_that_breaks_the_document_is_caught() -> None:
    from jsonschema import ValidationError

    with pytest.raises(ValidationError):
        openapi_check.check("POST", "http://h/a/jupyter-ci/sessions/abc/execute", 200,
                            "application/json", b'{"status": "fine", "outputs": []}')
    with pytest.raises(AssertionError, match="not documented"):
        openapi_check.check("GET", "http://h/jupyter-ci/sessions", 418, "application/json",
                            b"{}")


def test_a_405_without_the_routes_allow_is_caught() -> None:
    url = "http://h/jupyter-ci/sessions/abc"
    body = b'{"message": "Method Not Allowed", "reason": "Method Not Allowed"}'
    openapi_check.check("PATCH", url, 405, "application/json", body, "GET, DELETE")
    with pytest.raises(AssertionError, match="Allow"):
        openapi_check.check("PATCH", url, 405, "application/json", body, None)
    with pytest.raises(AssertionError, match="Allow"):
        openapi_check.check("PATCH", url, 405, "application/json", body, "GET")
    with pytest.raises(AssertionError, match="405"):
        openapi_check.check("PATCH", url, 400, "application/json", body, "GET, DELETE")


def test_an_undocumented_event_is_caught() -> None:
    from jsonschema import ValidationError

    openapi_check.check_event("clear_output", {"wait": False})
    openapi_check.check_event("text", {"type": "text", "delta": "hi"}, "ask")
    with pytest.raises(AssertionError, match="undocumented"):
        openapi_check.check_event("surprise", {}, "ask")
    with pytest.raises(ValidationError):
        openapi_check.check_event("step_end", {"step": 1}, "ask")
