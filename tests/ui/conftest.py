"""The browser tests' own fixtures; the shared ones are in tests/ui/fixtures.py (a plugin)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakellm import FakeLLM


@pytest.fixture(autouse=True)
def jp_asyncio_loop() -> Iterator[None]:
    """Replace pytest-jupyter's autouse loop: it would close Playwright's running loop."""
    yield None


@pytest.fixture(autouse=True)
def jp_server_cleanup() -> Iterator[None]:
    """Replace pytest-jupyter's in-process server cleanup: these tests run `jupyter lab`."""
    yield None


@pytest.fixture
def fake(session_fake: FakeLLM) -> Iterator[FakeLLM]:
    """The session's fake model (the lab server holds its URL), emptied around each test."""
    session_fake.reset()
    yield session_fake
    session_fake.reset()
