"""Sphinx extension: pages generated from the code at build time (settings, REST API).

A page holds a marker line, ``<!-- generated: settings -->`` or ``<!-- generated: rest-api -->``;
at ``source-read`` it is replaced by Markdown written from the traitlets and the JupyterLab
settings schema, or from ``jupyter_ci/server/openapi.json``. A setting or a route added to the
code appears on the next build without editing a page. Nothing is fetched.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parent.parent.parent
OPENAPI = ROOT / "jupyter_ci" / "server" / "openapi.json"
LAB_SCHEMA = ROOT / "labextension" / "schema" / "plugin.json"
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)
METHODS = ("get", "post", "put", "delete", "patch")


def text(value: str) -> str:
    """Make help text safe as Markdown: no raw HTML, no stray emphasis."""
    return value.replace("\\", "\\\\").replace("<", "&lt;").replace("*", "\\*").strip()


def trait_section(prefix: str, name: str, trait: Any) -> list[str]:
    """Write one setting: its name, type, default and help."""
    kind = type(trait).__name__
    default = trait.default_value_repr()
    return [f"### `{prefix}.{name}`", "",
            f"{kind} ({trait.info()}); default `{default}`.", "",
            text(trait.help or "(no help text)"), ""]


def configurables() -> list[tuple[str, str, type, list[str]]]:
    """List (title, prefix, class, trait names) for every configurable jupyter-ci defines."""
    from jupyter_ci.config import JupyterCI
    from jupyter_ci.config_sessions import SandboxSettings, SessionSettings
    from jupyter_ci.server.nodelay import KernelWebsockets

    def own(cls: Any) -> list[str]:
        return sorted(cls.class_own_traits(config=True))

    # Every jupyter-ci setting is spelled c.JupyterCI; each service reads its own class.
    return [
        ("Asks, models, keys, cost and approval (`JupyterCI`: kernels and the server)",
         "c.JupyterCI", JupyterCI, own(JupyterCI)),
        ("REST sessions (`SessionSettings`, read by the sessions service)", "c.JupyterCI",
         SessionSettings, own(SessionSettings)),
        ("The sandbox (`SandboxSettings`, read by the sandbox provisioner)", "c.JupyterCI",
         SandboxSettings, own(SandboxSettings)),
        ("Kernel websockets (`KernelWebsockets`, server only)", "c.KernelWebsockets",
         KernelWebsockets, own(KernelWebsockets)),
    ]


def settings_markdown() -> str:
    """Write every traitlet jupyter-ci defines, then the JupyterLab extension's settings."""
    lines: list[str] = []
    for title, prefix, cls, names in configurables():
        lines += [f"## {title}", ""]
        traits = cls.class_traits(config=True)
        for name in names:
            lines += trait_section(prefix, name, traits[name])
    schema = json.loads(LAB_SCHEMA.read_text(encoding="utf-8"))
    lines += ["## JupyterLab settings (Settings > Settings Editor > jupyter-ci)", "",
              text(schema.get("description", "")), ""]
    for name, prop in schema.get("properties", {}).items():
        lines += [f"### `{name}`", "",
                  f"{prop.get('title', name)}: {prop.get('type')}; default "
                  f"`{json.dumps(prop.get('default'))}`.", "",
                  text(prop.get("description", "")), ""]
    return "\n".join(lines)


def ref_of(schema: dict[str, Any]) -> str | None:
    """Return the component name a schema refers to, if it is a reference."""
    ref = schema.get("$ref", "")
    return ref.rsplit("/", 1)[-1] if ref.startswith("#/components/") else None


def schema_text(schema: dict[str, Any] | None) -> str:
    """Describe a schema in one cell: a link to a named one, else its type."""
    if not schema:
        return ""
    ref = schema.get("$ref") or schema.get("items", {}).get("$ref", "")
    event = re.fullmatch(r"#/components/schemas/(\w+Events)/properties/(\w+)", ref)
    if event:  # one named server-sent event of an events schema
        label = f"rest-event-{event[1].lower()}-{event[2]}"
        return f"{{ref}}`{event[2]} <{label}>` event"
    name = ref_of(schema) or ref_of(schema.get("items", {}))
    if name:
        return f"{{ref}}`{name} <rest-schema-{name.lower()}>`"
    if "allOf" in schema:  # a named schema with fields of its own beside it
        return " + ".join(schema_text(part) for part in schema["allOf"])
    kinds = schema.get("type") or "any"
    return f"`{'/'.join(kinds) if isinstance(kinds, list) else kinds}`"


def json_block(data: Any) -> list[str]:
    """Fence `data` as JSON."""
    return ["```json", json.dumps(data, indent=2, ensure_ascii=False), "```", ""]


def cell(value: str) -> str:
    """Make `value` fit in one table cell."""
    return text(" ".join(value.split())).replace("|", "\\|")


def parameters_table(params: list[dict[str, Any]]) -> list[str]:
    """Tabulate path and query parameters."""
    if not params:
        return []
    rows = ["| Parameter | In | Required | Description |", "| --- | --- | --- | --- |"]
    rows += [f"| `{p['name']}` | {p.get('in', '')} | {'yes' if p.get('required') else 'no'} "
             f"| {cell(p.get('description', ''))} |" for p in params]
    return [*rows, ""]


def body_lines(body: dict[str, Any]) -> list[str]:
    """Describe a request body: each content type and its schema."""
    lines = ["**Request body**" + (" (required)" if body.get("required") else ""), ""]
    if body.get("description"):
        lines += [text(body["description"]), ""]
    for ctype, content in body.get("content", {}).items():
        schema = content.get("schema", {})
        lines += [f"- `{ctype}`: {schema_text(schema) or 'any'}"]
        if schema and not ref_of(schema):
            # Every line indented into the list item (a dump holds many): a line left at the
            # margin would end the item and leave its fence open over the rest of the page.
            block = "\n".join(json_block(schema)).splitlines()
            lines += ["", *[f"  {line}" if line else "" for line in block]]
    return [*lines, ""]


def response_rows(responses: dict[str, Any], components: dict[str, Any]) -> list[str]:
    """Tabulate the responses of one operation, resolving shared ones."""
    rows = ["| Status | Description | Content |", "| --- | --- | --- |"]
    for status, resp in responses.items():
        name = ref_of(resp)
        if name:
            resp = components.get("responses", {}).get(name, {})
        content = ", ".join(f"`{ctype}` {schema_text(c.get('schema'))}".strip()
                            for ctype, c in resp.get("content", {}).items())
        rows.append(f"| {status} | {cell(resp.get('description', ''))} | {content} |")
    return [*rows, ""]


def operation_lines(path: str, method: str, op: dict[str, Any], shared: list[Any],
                    components: dict[str, Any]) -> list[str]:
    """Write one route and method."""
    lines = [f"## `{method.upper()} {path}`", ""]
    for key in ("summary", "description"):
        if op.get(key):
            lines += [text(op[key]), ""]
    lines += parameters_table([*shared, *op.get("parameters", [])])
    if op.get("requestBody"):
        lines += body_lines(op["requestBody"])
    lines += ["**Responses**", "", *response_rows(op.get("responses", {}), components)]
    return lines


def schema_lines(name: str, schema: dict[str, Any]) -> list[str]:
    """Write one named schema; an events schema gets a heading per server-sent event."""
    lines = [f"(rest-schema-{name.lower()})=", f"### `{name}`", ""]
    if schema.get("description"):
        lines += [text(schema["description"]), ""]
    if name.endswith("Events"):
        for event, data in schema.get("properties", {}).items():
            lines += [f"(rest-event-{name.lower()}-{event})=", f"#### event: `{event}`", "",
                      text(data.get("description", "")), "",
                      *json_block({k: v for k, v in data.items() if k != "description"})]
        return lines
    return lines + json_block(schema)


def rest_api_markdown() -> str:
    """Write every path, method, body, response, schema and named event of the document."""
    doc = json.loads(OPENAPI.read_text(encoding="utf-8"))
    components = doc.get("components", {})
    info = doc.get("info", {})
    lines = [f"OpenAPI {doc.get('openapi')}, *{text(info.get('title', ''))}* "
             f"version {info.get('version', '')}.", ""]
    if info.get("description"):
        lines += [text(info["description"]), ""]
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                lines += operation_lines(path, method, item[method],
                                         item.get("parameters", []), components)
    lines += ["## Schemas", ""]
    for name, schema in components.get("schemas", {}).items():
        lines += schema_lines(name, schema)
    return "\n".join(lines)


GENERATORS = {"settings": settings_markdown, "rest-api": rest_api_markdown}


def fill(app: Sphinx, docname: str, source: list[str]) -> None:
    """Replace each marker in a page by what it names."""
    source[0] = MARKER.sub(lambda m: GENERATORS[m.group(1)](), source[0])


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the source-read hook."""
    app.connect("source-read", fill)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
