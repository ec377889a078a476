"""What the key broker forwards: the provider's model-call routes and a few headers, no more.

A kernel holding a broker token can run any code, so the token must buy model calls only:
never files, batches, organisation or admin routes, never a path that climbs out of the
provider's base URL, and never a header that picks another account (`OpenAI-Organization`,
`anthropic-workspace-id`) or speaks for another client (`X-Forwarded-For`, `Forwarded`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import unquote

from jupyter_ci.providers import Route
from jupyter_ci.server.errors import BadRequest, ForbiddenRoute

#: Request headers relayed upstream, as the installed openai and anthropic SDKs send them
#: (streaming, retries and helpers included); the real key is added by the broker.
FORWARDED_HEADERS = frozenset(
    {"accept", "content-type", "user-agent", "anthropic-version", "anthropic-beta",
     "openai-beta"}
)
#: The SDKs' own telemetry and retry bookkeeping (x-stainless-retry-count, -timeout, ...).
FORWARDED_PREFIXES = ("x-stainless-",)

# Returned to the kernel: what the SDKs read (type, retry hints, request ids). Upstream
# cookies and encodings stay out, since the body is relayed decoded on Jupyter's origin.
_KEPT_RESPONSE_HEADERS = frozenset(
    {"content-type", "retry-after", "retry-after-ms", "x-should-retry", "request-id",
     "x-request-id"}
)
_KEPT_RESPONSE_PREFIXES = ("openai-", "anthropic-", "x-ratelimit-")

# One `{id}` segment: model ids such as gpt-4.1 or ft:gpt-4o:org:name:id, nothing that
# could mean a path (slashes, dots alone, percent signs, backslashes) or break a log line.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,255}")
# A header value the upstream HTTP library can send as is: printable ASCII and tabs.
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)


def split_provider(raw_path: str) -> tuple[str, str]:
    """Split the still-encoded path after the broker route into provider and the rest."""
    provider, _, rest = raw_path.lstrip("/").partition("/")
    return provider, rest


def segments(raw_path: str) -> list[str]:
    """Percent-decode a path segment by segment, refusing anything that is not plain."""
    if not raw_path:
        return []
    decoded = []
    for raw in raw_path.split("/"):
        # Checked before decoding: once decoded, %2F cannot be told from a real slash.
        if _ENCODED_SEPARATOR.search(raw):
            raise BadRequest("The broker refuses paths with encoded slashes or backslashes.")
        try:
            part = unquote(raw, errors="strict")
        except UnicodeDecodeError:
            raise BadRequest("The broker refuses paths that are not UTF-8.") from None
        if part in ("", ".", ".."):
            raise BadRequest("The broker refuses empty, '.' and '..' path segments.")
        if not part.isprintable() or "\\" in part or "/" in part:
            raise BadRequest("The broker refuses paths with control characters.")
        decoded.append(part)
    return decoded


def match_route(routes: Sequence[Route], method: str, raw_path: str) -> str:
    """Return the decoded path to forward (below the base URL), or raise why not."""
    parts = segments(raw_path)
    for route in routes:
        if route.method == method and _matches(route.path.split("/"), parts):
            return "/".join(parts)  # no segment holds a slash; url_for re-encodes them
    allowed = ", ".join(f"{route.method} {route.path}" for route in routes) or "nothing"
    raise ForbiddenRoute(
        f"The jupyter-ci broker forwards model calls only; this {method or 'request'} is not "
        f"one of them (it forwards: {allowed})."
    )


def _matches(template: list[str], parts: list[str]) -> bool:
    """Say whether decoded path segments fit a route path, `{id}` taking one safe segment."""
    if len(template) != len(parts):
        return False
    return all(
        _ID.fullmatch(part) is not None if want == "{id}" else want == part
        for want, part in zip(template, parts, strict=True)
    )


def forwarded_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Keep the allowlisted request headers; refuse one whose value cannot be sent as is."""
    kept = {}
    for name, value in headers.items():
        lower = name.lower()
        if lower not in FORWARDED_HEADERS and not lower.startswith(FORWARDED_PREFIXES):
            continue
        if not _HEADER_VALUE.fullmatch(value):
            # The name is from the allowlist (x-stainless-* aside, which is safe to echo
            # once quoted); the value is never repeated.
            raise BadRequest(f"The header {lower!r} must be printable ASCII.")
        kept[name] = value
    return kept


def keep_response_header(name: str) -> bool:
    """Say whether an upstream response header is relayed to the kernel."""
    lower = name.lower()
    return lower in _KEPT_RESPONSE_HEADERS or lower.startswith(_KEPT_RESPONSE_PREFIXES)
