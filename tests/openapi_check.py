"""Hold the REST sessions' replies to the OpenAPI document the package serves."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from jsonschema import Draft202012Validator

import jupyter_ci

DOCUMENT = Path(jupyter_ci.__file__).parent / "server" / "openapi.json"
#: How many replies were checked (a test asserts the hook really ran).
checked: list[tuple[str, str, int]] = []


@cache
def document() -> dict[str, Any]:
    """Return the OpenAPI document as the package ships it."""
    return dict(json.loads(DOCUMENT.read_text()))


def _operation(method: str, path: str) -> tuple[str, dict[str, Any]]:
    """Find the documented operation a request path and method belong to."""
    for template, item in document()["paths"].items():
        pattern = "^" + re.sub(r"\\{path\\}", ".+", re.sub(r"\\{id\\}", "[^/]+",
                                                           re.escape(template))) + "$"
        if re.match(pattern, path) and method.lower() in item:
            return template, item[method.lower()]
    raise AssertionError(f"{method} {path} is not in the OpenAPI document")


def schema_for(method: str, path: str, status: int, content_type: str) -> dict[str, Any] | None:
    """Return the documented schema of this reply (None for a documented empty one)."""
    template, operation = _operation(method, path)
    response = operation["responses"].get(str(status))
    assert response is not None, f"{method} {template} answered {status}, not documented"
    if "$ref" in response:
        response = document()["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    content = response.get("content")
    if content is None:
        return None
    media = content_type.split(";")[0].strip()
    assert media in content, f"{method} {template} {status} answered {media}, not documented"
    return dict(content[media]["schema"])


def _template(path: str) -> dict[str, Any]:
    """Return the document's path item a request path belongs to."""
    for template, item in document()["paths"].items():
        pattern = "^" + re.sub(r"\\{path\\}", ".+", re.sub(r"\\{id\\}", "[^/]+",
                                                           re.escape(template))) + "$"
        if re.match(pattern, path):
            return dict(item)
    raise AssertionError(f"{path} is not in the OpenAPI document")


def check_not_allowed(method: str, path: str, status: int, allow: str | None, body: bytes
                      ) -> None:
    """An undocumented method: the documented 405, its Allow the route's documented methods."""
    methods = {m.upper() for m in _template(path) if m in ("get", "put", "post", "delete")}
    assert status == 405, f"{method} {path} answered {status}, not the documented 405"
    assert allow is not None and set(allow.replace(" ", "").split(",")) == methods, (
        f"{method} {path}: Allow {allow!r}, documented {sorted(methods)}")
    response = document()["components"]["responses"]["MethodNotAllowed"]
    schema = response["content"]["application/json"]["schema"]
    Draft202012Validator({**document(), **schema}).validate(json.loads(body))
    checked.append((method, path, status))


def check(method: str, url: str, status: int, content_type: str, body: bytes,
          allow: str | None = None) -> None:
    """Validate one reply against the document (raises AssertionError or ValidationError)."""
    path = unquote(urlsplit(url).path)
    path = path[path.index("/jupyter-ci/"):]
    if method.lower() not in _template(path):
        return check_not_allowed(method, path, status, allow, body)
    schema = schema_for(method, path, status, content_type or "application/json")
    checked.append((method, path, status))
    if schema is None:
        assert not body, f"{method} {path} {status} should have no body"
        return
    if content_type.startswith("application/json"):
        # The document is the root, so its #/components/... references resolve.
        Draft202012Validator({**document(), **schema}).validate(json.loads(body))


def check_event(name: str, data: Any, route: str = "execute") -> None:
    """Validate one server-sent event of a streamed execute (or an ask) against the document."""
    events = document()["components"]["schemas"]["AskEvents" if route == "ask" else
                                                 "ExecuteEvents"]["properties"]
    assert name in events, f"{route} sent an undocumented event {name!r}"
    Draft202012Validator({**document(), **events[name]}).validate(data)


def check_schema(name: str, data: Any) -> None:
    """Validate data against one of the document's component schemas."""
    schema = document()["components"]["schemas"][name]
    Draft202012Validator({**document(), **schema}).validate(data)
