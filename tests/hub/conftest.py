"""One real JupyterHub per test module (tests/hub/harness.py), with two users and an admin."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakellm import FakeLLM
from tests.hub.harness import HUB_KEY, Hub, UnixUser, make_users, reachable_python, remove_user
from tests.hub.harness import running_hub as start_hub

#: The test users' accounts (Unix names, so the Hub's names too).
ALICE, BOB, ADMIN = "jcihubalice", "jcihubbob", "jcihubadmin"
#: Alice's budget, small enough that one turn uses it up.
ALICE_TOKENS_PER_DAY = 100


@pytest.fixture(autouse=True)
def jp_asyncio_loop() -> Iterator[None]:
    """Replace pytest-jupyter's autouse loop: these tests run real processes."""
    yield None


@pytest.fixture(autouse=True)
def jp_server_cleanup() -> Iterator[None]:
    """Replace pytest-jupyter's in-process server cleanup: no server runs in-process here."""
    yield None


@dataclass
class Team:
    """The Hub, the fake provider behind its service, and the users."""

    hub: Hub
    fake: FakeLLM
    alice: UnixUser
    bob: UnixUser


@pytest.fixture(scope="module")
def team() -> Iterator[Team]:
    """Start the Hub with alice's and bob's servers, the fake model as its provider."""
    root = Path(tempfile.mkdtemp(prefix="jupyter-ci-hub-"))
    root.chmod(0o755)
    users = make_users([ALICE, BOB])
    try:
        python = reachable_python(root, users[0])
        with FakeLLM() as fake:
            env = {"OPENAI_API_KEY": HUB_KEY, "OPENAI_BASE_URL": fake.openai_base_url}
            budgets = {ALICE: {"tokens_per_day": ALICE_TOKENS_PER_DAY}}
            # Groups a test changes are seen at once (users_ttl 0: no cache).
            with start_hub(root, python, [ALICE, BOB], ADMIN, env, budgets,
                           {"users_ttl": 0}) as hub:
                for user in users:
                    hub.start_server(user.name)
                yield Team(hub, fake, *users)
    finally:
        for user in users:
            remove_user(user.name)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def fresh_script(request: pytest.FixtureRequest) -> Iterator[None]:
    """Start each test of a module with a Hub with the fake model's script empty."""
    if "team" in request.fixturenames:
        request.getfixturevalue("team").fake.reset()
    yield None
