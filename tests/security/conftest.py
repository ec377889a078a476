"""The service tests' server: the extension and a fake provider (tests/service_fixtures.py)."""

from tests.service_fixtures import (
    capture,
    ci_config,
    jp_server_config,
    live_server,
    server_env,
    token,
    upstream,
)

__all__ = ["capture", "ci_config", "jp_server_config", "live_server", "server_env", "token",
           "upstream"]
