"""The OpenAPI document says what the server does: 405 with Allow, null limits, refused env
names, extension-less downloads as bytes."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import ValidationError

from jupyter_ci.models.broker import MANAGED
from jupyter_ci.server.sessions import ask
from tests import openapi_check
from tests.test_sessions import (  # noqa: F401  (the fixtures, for this module's server)
    call,
    ci_config,
    jp_server_config,
    more_config,
    new_session,
)

Fetch = Any
REFUSED = ["JUPYTER_CI_X", "KERNEL_ID", "1BAD", "A-B", "LD_PRELOAD", MANAGED[0]]


async def test_a_method_a_route_lacks_is_a_405_with_allow(jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    # call() checks each against the document: 405, Allow = the documented methods.
    for method, path in (("PATCH", (sid,)), ("PUT", (sid, "execute")), ("PATCH", ()),
                         ("POST", (sid, "files", "a.txt"))):
        status, reply = await call(jp_fetch, method, *path, raw=b"{}")
        assert status == 405 and reply["reason"], (method, path, reply)
    assert openapi_check.checked[-1][2] == 405


@pytest.mark.parametrize("name", REFUSED)
async def test_an_env_name_the_server_refuses_the_schema_refuses(jp_fetch: Fetch,
                                                                 name: str) -> None:
    with pytest.raises(ValidationError):
        openapi_check.check_schema("NewSession", {"env": {name: "1"}})
    with pytest.raises(ValidationError):
        openapi_check.check_schema("Execute", {"code": "1", "env": {name: "1"}})
    status, reply = await call(jp_fetch, "POST", body={"env": {name: "1"}})
    assert status == 400 and name in reply["message"], reply


def test_an_env_name_the_server_takes_the_schema_takes() -> None:
    openapi_check.check_schema("NewSession", {"env": {"MY_VAR": "1", "_x2": ""}})


@pytest.mark.parametrize("field", ["timeout", "max_steps", "max_fixes", "model"])
def test_an_asks_null_field_is_the_servers_default_as_documented(field: str) -> None:
    body = {"prompt": "hi", field: None}
    openapi_check.check_schema("Ask", body)
    assert getattr(ask.parse(body), field) is None  # None: c.JupyterCI's own


def test_an_executes_null_timeout_is_documented() -> None:
    openapi_check.check_schema("Execute", {"code": "1", "timeout": None})


@pytest.mark.parametrize("content", [b"", b"\x00\x01 not json", b'{"a": 1}'])
async def test_an_extensionless_download_is_bytes_as_an_attachment(
    jp_fetch: Fetch, content: bytes
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    status, _ = await call(jp_fetch, "PUT", sid, "files", "data", raw=content)
    assert status == 201
    response = await jp_fetch("jupyter-ci", "sessions", sid, "files", "data", method="GET")
    assert response.headers["Content-Type"] == "application/octet-stream"
    assert response.headers["Content-Disposition"] == "attachment"
    assert response.body == content
    openapi_check.check("GET", response.effective_url, 200,
                        response.headers["Content-Type"], response.body)


@pytest.mark.parametrize("where", ["session", "execute"])
async def test_a_nul_in_an_env_value_is_a_400_naming_the_variable(jp_fetch: Fetch,
                                                                  where: str) -> None:
    # No process environment can hold a NUL: the kernel's launch failed, a 503.
    env = {"FINE": "1", "MY_VAR": "a\x00b"}
    with pytest.raises(ValidationError):
        openapi_check.check_schema("NewSession", {"env": env})
    if where == "session":
        status, reply = await call(jp_fetch, "POST", body={"env": env})
    else:
        sid = (await new_session(jp_fetch))["id"]
        status, reply = await call(jp_fetch, "POST", sid, "execute",
                                   body={"code": "1", "env": env})
    assert status == 400 and reply["reason"] == "bad_request", reply
    assert "MY_VAR" in reply["message"] and "FINE" not in reply["message"], reply
