"""The broker tests' server: the extension and a fake provider, as tests/test_server.py has it."""

from tests.test_server import (
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
