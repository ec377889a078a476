"""The generated reference pages (docs/_ext) hold every setting, route and event there is."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from jupyter_ci.config import ServerSettings
from jupyter_ci.server.nodelay import KernelWebsockets

ROOT = Path(__file__).resolve().parent.parent


def generator() -> ModuleType:
    """Load docs/_ext/jupyter_ci_docs.py, the extension that writes the pages."""
    path = ROOT / "docs" / "_ext" / "jupyter_ci_docs.py"
    spec = importlib.util.spec_from_file_location("jupyter_ci_docs", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_page_lists_every_setting_with_its_help() -> None:
    page = generator().settings_markdown()
    # ServerSettings: every c.JupyterCI setting, whichever service reads it.
    for prefix, cls in (("c.JupyterCI", ServerSettings), ("c.KernelWebsockets", KernelWebsockets)):
        for name, trait in cls.class_traits(config=True).items():
            assert f"### `{prefix}.{name}`" in page, f"{prefix}.{name} is not on the page"
            assert trait.help.split()[0] in page
    lab = json.loads((ROOT / "labextension" / "schema" / "plugin.json").read_text())
    for name in lab["properties"]:
        assert f"### `{name}`" in page


def test_the_rest_api_page_has_every_route_schema_and_event() -> None:
    page = generator().rest_api_markdown()
    doc = json.loads((ROOT / "jupyter_ci" / "server" / "openapi.json").read_text())
    for path, item in doc["paths"].items():
        for method in item.keys() & {"get", "post", "put", "delete", "patch"}:
            assert f"## `{method.upper()} {path}`" in page, f"{method} {path} is missing"
    schemas = doc["components"]["schemas"]
    for name in schemas:
        assert f"(rest-schema-{name.lower()})=" in page
    for events in ("AskEvents", "ExecuteEvents"):
        for event in schemas[events]["properties"]:
            assert f"#### event: `{event}`" in page, f"{events}: {event} is missing"
