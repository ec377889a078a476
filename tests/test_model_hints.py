"""A local model's name without OPENAI_BASE_URL, and a base URL that fails, in the errors.

`-m openai:llama3.1` with no base URL goes to OpenAI's cloud: the error says the name looks
like a local model's and how to point at Ollama, vLLM or LiteLLM; OpenAI's own names get
no such guess. A URL that fails names where it was set. The real `openai` SDK against
tests/fakellm.py, which stands for OpenAI's cloud (404 model_not_found, 401) or a local
server; then `%%ask` in a real kernel. The server's side: test_model_hints_server.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_ci import providers
from jupyter_ci.agent.errors import AskError, ModelConfigError, ModelUnavailable
from jupyter_ci.models.base import Endpoint, UrlSetting
from jupyter_ci.models.broker import ENV_PROVIDERS, ENV_TOKEN, ENV_URL
from jupyter_ci.models.openai import OpenAIChatModel
from jupyter_ci.models.resolve import DIRECT_URL, SERVER_URL, ModelSettings, resolve_model
from tests.fakellm import Fail, FakeLLM
from tests.kernelrun import Kernel
from tests.nbrun import TEST_KEY, clean_env
from tests.test_models import ask, closed_port

KEY = "sk-test-HINTS-0123456789"
OPENAI = providers.PROVIDERS["openai"]
#: Names of models local servers serve: Ollama's (with and without a tag), vLLM's.
LOCAL_NAMES = ["llama3.1", "qwen2.5-coder:7b", "gpt-oss:20b", "meta-llama/Llama-3.1-8B-Instruct"]
#: OpenAI's own: these must never get the local guess.
OPENAI_NAMES = ["gpt-4.1", "gpt-5.5", "o1", "o3-mini", "o4-mini", "chatgpt-4o-latest",
                "ft:gpt-4o-mini-2024-07-18:acme::9abcDEF"]
OLLAMA_URL = "OPENAI_BASE_URL=http://localhost:11434/v1"
#: What a kernel outside a server says of OPENAI_BASE_URL.
FROM_KERNEL_ENV = "set by OPENAI_BASE_URL in this kernel's environment"


#: What a kernel outside a server resolves when no OPENAI_BASE_URL is set.
CLOUD = UrlSetting("", DIRECT_URL)


def cloud(fake: FakeLLM, name: str, setting: UrlSetting = CLOUD, url: str = ""
          ) -> OpenAIChatModel:
    """Return the adapter of `name` as resolved with no base URL; the fake is the cloud."""
    endpoint = Endpoint(KEY, url or fake.openai_base_url, 5.0, 0, url_setting=setting)
    return OpenAIChatModel(OPENAI, name, endpoint)


def failure(model: OpenAIChatModel, kind: type[AskError]) -> AskError:
    """Run a turn that must fail with `kind`; return the error, checked for the key."""
    with pytest.raises(kind) as info:
        model.complete(ask(), lambda _: None)
    assert KEY not in str(info.value)
    return info.value


# ------------------------------------------------------------ the adapter, with the real SDK


@pytest.mark.parametrize("status", [404, 401])
@pytest.mark.parametrize("name", LOCAL_NAMES)
def test_a_local_models_name_sent_to_the_cloud_is_told_how_to_reach_a_local_server(
    fake: FakeLLM, name: str, status: int
) -> None:
    fake.push(Fail(status))
    error = failure(cloud(fake, name), ModelConfigError)
    assert f"HTTP {status}" in error.message
    assert f"'{name}' looks like the name of a local model" in error.hint
    assert OLLAMA_URL in error.hint and "vLLM" in error.hint and "LiteLLM" in error.hint
    assert DIRECT_URL in error.hint
    if status == 401:  # and what a refused key otherwise means
        assert "Check OPENAI_API_KEY" in error.hint


@pytest.mark.parametrize("status", [404, 401])
@pytest.mark.parametrize("name", OPENAI_NAMES)
def test_openais_own_model_names_get_no_local_guess(
    fake: FakeLLM, name: str, status: int
) -> None:
    fake.push(Fail(status))
    error = failure(cloud(fake, name), ModelConfigError)
    assert f"HTTP {status}" in error.message
    assert "local" not in str(error) and "11434" not in str(error)


def test_an_unreachable_base_url_says_where_it_was_set(fake: FakeLLM) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    error = failure(cloud(fake, "llama3.1", UrlSetting(FROM_KERNEL_ENV, DIRECT_URL), url),
                    ModelUnavailable)
    assert error.message.startswith(f"Could not connect to OpenAI at {url} ({FROM_KERNEL_ENV}; ")
    assert FROM_KERNEL_ENV in error.hint and DIRECT_URL in error.hint
    # A URL set on purpose is not second-guessed as a forgotten one.
    assert "looks like" not in str(error)


def test_a_model_a_local_server_does_not_know_says_where_its_url_was_set(fake: FakeLLM) -> None:
    fake.push(Fail(404, message='model "llama3.1" not found, try pulling it first'))
    error = failure(cloud(fake, "llama3.1", UrlSetting(FROM_KERNEL_ENV, DIRECT_URL)),
                    ModelConfigError)
    assert "try pulling it first" in error.message
    assert "ollama pull llama3.1" in error.hint and FROM_KERNEL_ENV in error.hint
    assert "/v1" in error.hint and "looks like" not in str(error)


@pytest.mark.parametrize("name", ["llama3.1", "gpt-4.1"])
def test_a_kernel_under_a_server_without_openai_is_told_about_the_url_for_a_local_name(
    name: str
) -> None:
    # What a notebook kernel's environment holds when its server serves Anthropic only.
    env = {ENV_URL: "http://127.0.0.1:1/jupyter-ci/broker", ENV_TOKEN: "t",
           ENV_PROVIDERS: "anthropic"}
    with pytest.raises(ModelConfigError) as info:
        resolve_model(f"openai:{name}", ModelSettings(), env)
    error = info.value
    assert error.message == "The Jupyter server has no key for openai."
    if name == "gpt-4.1":
        assert "looks like" not in error.hint and "OPENAI_API_KEY" in error.hint
    else:
        assert f"'{name}' looks like the name of a local model" in error.hint
        assert OLLAMA_URL in error.hint and SERVER_URL in error.hint


# ------------------------------------------------------------ %%ask in a real kernel


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    """A kernel with no provider key or URL in its environment, the magics loaded."""
    k = Kernel(clean_env(), str(tmp_path))
    assert k.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
    yield k
    k.close()


def ask_error(kernel: Kernel, cell: str) -> str:
    """Run an %%ask cell that must fail; return its error's text (message and hint)."""
    reply = kernel.execute(cell).reply["content"]
    assert reply["status"] == "error", reply
    return str(reply["evalue"])


def as_cloud(fake: FakeLLM) -> str:
    """Code that makes the fake OpenAI's cloud in a kernel (its table's default URL)."""
    return ("import dataclasses\nfrom jupyter_ci import providers\n"
            "providers.register(dataclasses.replace(providers.PROVIDERS['openai'], "
            f"default_url={fake.openai_base_url!r}))\n"
            f"import os\nos.environ['OPENAI_API_KEY'] = {TEST_KEY!r}")


def test_ask_in_a_kernel_without_key_or_url_for_a_local_name_is_told_about_the_url(
    kernel: Kernel
) -> None:
    text = ask_error(kernel, "%%ask -m openai:qwen2.5-coder:7b\nhello")
    assert "No API key for openai" in text
    assert "'qwen2.5-coder:7b' looks like the name of a local model" in text
    assert OLLAMA_URL in text and "needs no key" in text
    # An OpenAI model's name: the key is what is missing.
    text = ask_error(kernel, "%%ask -m openai:gpt-4.1\nhello")
    assert "OPENAI_API_KEY" in text and "looks like" not in text


def test_ask_in_a_kernel_sending_a_local_name_to_the_cloud_gets_the_hint(
    kernel: Kernel, fake: FakeLLM
) -> None:
    assert kernel.execute(as_cloud(fake)).reply["content"]["status"] == "ok"
    fake.push(Fail(404), Fail(404))
    text = ask_error(kernel, "%%ask -m openai:llama3.1\nhello")
    assert "does not know the model 'llama3.1' (HTTP 404)" in text
    assert "model_not_found" not in text  # the provider's words, not its codes
    assert "looks like the name of a local model" in text and OLLAMA_URL in text
    text = ask_error(kernel, "%%ask -m openai:gpt-4.1\nhello")
    assert "does not know the model 'gpt-4.1' (HTTP 404)" in text and "looks like" not in text
    assert fake.calls() == 2


def test_ask_in_a_kernel_with_a_wrong_base_url_names_the_variable(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    k = Kernel(clean_env(OPENAI_BASE_URL=url), str(tmp_path))
    try:
        assert k.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
        text = ask_error(k, "%%ask -m openai:llama3.1\nhello")
    finally:
        k.close()
    assert f"Could not connect to OpenAI at {url} ({FROM_KERNEL_ENV}; " in text
    assert "looks like" not in text
