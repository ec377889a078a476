"""One table of providers: a provider added as one entry is known to every part."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from jupyter_ci import providers
from jupyter_ci.agent.errors import ModelConfigError
from jupyter_ci.agent.types import Message, ModelRequest
from jupyter_ci.models.resolve import ModelSettings, default_model_id, resolve_model
from jupyter_ci.providers import ProviderSpec
from jupyter_ci.server.broker.broker import Broker
from jupyter_ci.server.broker.errors import NoProviderKey
from jupyter_ci.server.broker.model_service import ModelService
from jupyter_ci.server.broker.panel import panel_config
from tests.fakellm import Fail, FakeLLM, Turn

LOCAL = ProviderSpec(
    name="local", label="Local vLLM", adapter="jupyter_ci.models.openai:OpenAIChatModel",
    key_var="LOCAL_API_KEY", url_var="LOCAL_BASE_URL", default_model="qwen-test",
    default_url="http://127.0.0.1:9/v1", models_path="models", keyless_with_url=True,
)


@pytest.fixture
def local() -> Iterator[ProviderSpec]:
    """Add the `local:` provider for one test only."""
    providers.register(LOCAL)
    yield LOCAL
    providers.unregister(LOCAL.name)


def test_resolver_knows_the_new_provider(local: ProviderSpec) -> None:
    env = {"LOCAL_API_KEY": "k-local-123456"}
    assert default_model_id(ModelSettings(), env) == "local:qwen-test"
    with pytest.raises(ModelConfigError, match="LOCAL_API_KEY"):
        resolve_model("local:qwen", ModelSettings(), {})
    with pytest.raises(ModelConfigError, match="local"):
        resolve_model("nowhere:qwen", ModelSettings(), env)


def test_the_new_provider_answers_through_its_adapter(local: ProviderSpec) -> None:
    with FakeLLM([Turn("hello from local")]) as fake:
        model = resolve_model("local:qwen", ModelSettings(retries=0),
                              {"LOCAL_BASE_URL": fake.openai_base_url})
        assert model.id == "local:qwen"
        reply = model.complete(ModelRequest("", (Message("user", "hi"),), ()), lambda _: None)
        assert reply.text == "hello from local"
        assert fake.requests[0].body["model"] == "qwen"


def test_errors_name_the_new_provider_and_its_variable(local: ProviderSpec) -> None:
    with FakeLLM([Fail(401, message="bad key")]) as fake:
        model = resolve_model("local:qwen", ModelSettings(retries=0),
                              {"LOCAL_API_KEY": "k-local-123456",
                               "LOCAL_BASE_URL": fake.openai_base_url})
        with pytest.raises(ModelConfigError) as err:
            model.complete(ModelRequest("", (Message("user", "hi"),), ()), lambda _: None)
    assert "Local vLLM" in err.value.message and "LOCAL_API_KEY" in err.value.hint
    assert "k-local-123456" not in str(err.value)


def test_the_server_and_panel_know_the_new_provider(local: ProviderSpec) -> None:
    environ = {"LOCAL_API_KEY": "k-local-123456", "LOCAL_BASE_URL": "http://10.0.0.5:8000/v1"}
    broker = Broker.take_from_environ(environ)
    assert environ == {}, "the key and URL leave the environment kernels inherit"
    assert [p.name for p in broker.configured()] == ["local"]
    # The model service builds its adapter with the key and URL the server holds.
    adapter = asyncio.run(ModelService(broker).model("local:qwen-test"))
    endpoint = adapter.endpoint
    assert (endpoint.base_url, endpoint.api_key) == ("http://10.0.0.5:8000/v1", "k-local-123456")
    kernel_env = broker.kernel_environ("http://127.0.0.1:8888/jupyter-ci/broker")
    assert kernel_env["JUPYTER_CI_BROKER_PROVIDERS"] == "local"
    assert "k-local-123456" not in str(kernel_env) and "10.0.0.5" not in str(kernel_env)
    # The kernel side resolves the same provider, as a client of the model service.
    model = resolve_model(None, ModelSettings(), kernel_env)
    assert model.id == "local:qwen-test"
    config = panel_config("", [], broker.configured())
    assert config.models == ["local:qwen-test"] and config.problem is None


def test_panel_and_broker_errors_name_its_variables(local: ProviderSpec) -> None:
    config = panel_config("", [], [])
    assert config.problem is not None and "LOCAL_API_KEY" in config.problem
    broker = Broker.take_from_environ({})
    with pytest.raises(NoProviderKey, match="LOCAL_API_KEY"):
        broker.provider("local")
    # A kernel's turn for it is told the same, as a config error (HTTP 400 to the kernel).
    with pytest.raises(ModelConfigError, match="LOCAL_API_KEY"):
        asyncio.run(ModelService(broker).model("local:qwen"))
