"""Settings by service: each reads its own class, all are spelled `c.JupyterCI.<name>`."""

from __future__ import annotations

import logging

import pytest
from traitlets.config import Config

from jupyter_ci.config import JupyterCI, ServerSettings
from jupyter_ci.config_sessions import SandboxSettings, SessionSettings

#: One setting of each service, and a typo.
CONFIG = {"model": "openai:gpt-test", "session_pool": 0, "session_sandbox": "never",
          "sandbox_memory_bytes": 1 << 20, "sandbox_network": ["pypi.org"]}


def test_each_service_reads_its_own_settings_from_c_jupyterci() -> None:
    config = Config({"JupyterCI": CONFIG})
    assert JupyterCI(config=config).model == "openai:gpt-test"
    sessions = SessionSettings(config=config)
    assert sessions.session_pool == 0 and sessions.session_sandbox == "never"
    sandbox = SandboxSettings(config=config)
    assert sandbox.sandbox_memory_bytes == 1 << 20 and sandbox.sandbox_network == ["pypi.org"]
    server = ServerSettings(config=config)
    assert {name: getattr(server, name) for name in CONFIG} == CONFIG


def test_the_kernel_and_the_provisioner_hold_only_their_own_settings() -> None:
    kernel = set(JupyterCI.class_traits(config=True))
    box = set(SandboxSettings.class_traits(config=True))
    sessions = set(SessionSettings.class_traits(config=True))
    assert "session_pool" not in kernel and "sandbox_memory_bytes" not in kernel
    assert not box & sessions and not box & kernel and not sessions & kernel
    assert set(ServerSettings.class_traits(config=True)) == kernel | sessions | box


@pytest.mark.parametrize("cls", [JupyterCI, SessionSettings, SandboxSettings, ServerSettings])
def test_another_services_setting_is_no_warning_and_a_typo_still_is(
    cls: type[JupyterCI], caplog: pytest.LogCaptureFixture
) -> None:
    config = Config({"JupyterCI": {**CONFIG, "sesion_pool": 2}})
    with pytest.warns(UserWarning) as warned:
        cls(config=config)
    said = [str(w.message) for w in warned]
    assert len(said) == 1 and "`sesion_pool` not recognized" in said[0], said
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
