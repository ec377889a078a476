"""Attack: model-written code prints credentials, hoping they reach the provider in its output.

Prompt injection in the data steers the model into `print(open('.env').read())` or
`print(os.environ)`; whatever a run prints goes back to the model as its tool result. Every
tool result and the context go through one redaction: the kernel's own credentials (its
broker token, any provider key) are always replaced, and detect-secrets' rules plus ours
catch the rest. The model is told that values were redacted.
"""

from __future__ import annotations

import contextlib
import io
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

import jupyter_ci
from jupyter_ci.agent.feedback import REDACTION_NOTE
from jupyter_ci.agent.secrets import REDACTED, Redactor, redact
from jupyter_ci.agent.types import ModelReply, ModelRequest
from jupyter_ci.kernel.variables import describe_variable
from jupyter_ci.models.broker import ENV_TOKEN, ENV_URL
from jupyter_ci.models.scripted import ScriptedModel, code_call, register

STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DB_PASSWORD = "correct-horse-battery-staple"
DOTENV = (f"DB_PASSWORD={DB_PASSWORD}\nSTRIPE_KEY={STRIPE}\nAWS_ACCESS_KEY_ID={AWS_ID}\n"
          f"aws_secret_access_key = \"{AWS_SECRET}\"\nREGION=eu-west-1\n")


@pytest.fixture
def kernel(shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[InteractiveShell]:
    """A shell with jupyter-ci loaded, in a folder with a .env, holding a broker token."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(DOTENV)
    # What a kernel of a jupyter-ci server has in its environment.
    monkeypatch.setenv(ENV_TOKEN, secrets.token_urlsafe(32))
    monkeypatch.setenv(ENV_URL, "http://127.0.0.1:9/jupyter-ci/broker")
    jupyter_ci.load_ipython_extension(shell)
    yield shell


def run_ask(shell: InteractiveShell, name: str, code: str) -> ScriptedModel:
    """Ask once: the model runs `code`, then answers; return the model with its requests."""
    model = register(name, [code_call(code), ModelReply(text="Done.")])
    with contextlib.redirect_stdout(io.StringIO()):
        result = shell.run_cell(f"%%ask -m scripted:{name}\nsummarise the config")
    assert result.success, result.error_in_exec
    return model


def sent(request: ModelRequest) -> str:
    """Everything a model request carries, as one text."""
    return "\n".join([request.system, *(m.content for m in request.messages)])


def test_a_printed_dotenv_and_environ_reach_the_model_redacted(
    kernel: InteractiveShell,
) -> None:
    import os

    token = os.environ[ENV_TOKEN]
    model = run_ask(kernel, "leak_env", "import os\nprint(open('.env').read())\n"
                                        "print(dict(os.environ))")
    tool = [m.content for m in model.requests[1].messages if m.role == "tool"][-1]
    for secret in (token, STRIPE, AWS_ID, AWS_SECRET, DB_PASSWORD):
        assert secret not in sent(model.requests[1]), secret
    assert "REGION=eu-west-1" in tool  # what is not a secret stays readable
    assert f"DB_PASSWORD={REDACTED}" in tool and tool.endswith(REDACTION_NOTE)
    # The user's own cell output is theirs: only what goes to the model is redacted.
    assert kernel.user_ns["os"].environ[ENV_TOKEN] == token


def test_the_broker_token_is_redacted_from_a_traceback_and_the_context(
    kernel: InteractiveShell,
) -> None:
    import os

    token = os.environ[ENV_TOKEN]
    # A variable holding the token under an innocent name: the context must not show it.
    kernel.user_ns["innocent"] = f"prefix {token} suffix"
    model = run_ask(kernel, "leak_tb", f"raise ValueError({token!r}[::-1][::-1])")
    assert token not in sent(model.requests[0])
    assert "prefix [redacted] suffix" in sent(model.requests[0])
    second = sent(model.requests[1])
    assert token not in second and "ValueError: [redacted]" in second


@pytest.mark.parametrize(("text", "secret"), [
    ('-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBGXyZ1MBCADx\n'
     '=Abcd\n-----END PGP PRIVATE KEY BLOCK-----', "lQOYBGXyZ1MBCADx"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"
     "-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU"),
    ("hook = https://hooks.slack.com/services/T0ABCDEFG/B0ABCDEFG/abcdefghijklmnopqrstuvwx",
     "abcdefghijklmnopqrstuvwx"),
    ("token: pypi-AgEIcHlwaS5vcmcCJDk3ZjE3ZWYwLTNmZWQtNDJhZC1hN2E2LTU4MWUyYzQ3YjBmYgACKlsz"
     "LCJkZDhjYzI5My1kZDRiLTQ1NzUtYmY1ZC0wNGM2ZDY2ODBhNmIiXQ", "AgEIcHlwaS5vcmcCJDk3"),
    ("//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
     "npm_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("publish with npm_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 now",
     "npm_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
    ("https://bucket.s3.amazonaws.com/a.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
     "ASIAXYZ%2F20240101%2Fus-east-1&X-Amz-Signature=9f1c2b3a4d5e6f708192a3b4c5d6e7f8",
     "9f1c2b3a4d5e6f708192a3b4c5d6e7f8"),
    ("https://acct.blob.core.windows.net/c/f.csv?sv=2022-11-02&se=2025-01-01&sig=Xy%2Bz0QrS",
     "Xy%2Bz0QrS"),
    ("curl -u analyst:Tr0ub4dor https://internal/api", "Tr0ub4dor"),
    ("curl --user=analyst:Tr0ub4dor https://internal/api", "Tr0ub4dor"),
    ("settings = [('password', 'hunter2hunter2'), ('region', 'eu')]", "hunter2hunter2"),
    ("pw = 'letmein99'", "letmein99"),
    ("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 is the key",
     "TwL2iGABf9DHoTf"),
])
def test_credentials_the_old_rules_missed_are_redacted(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out and REDACTED in out, out


@pytest.mark.parametrize("text", [
    'df[["pw", "user"]]',
    "KeyError: \"['key', 'amount'] not in index\"",
    "('key', 'region')",
    "sha = 3f786850e387550fdab836ed7e6dc881de23001b",
    "order 8f14e45fceea167a5a36dedd4bea2543 shipped to 10.0.0.1",
    "first_pass = 3, n_tokens = 512",
])
def test_ordinary_data_and_code_stay_readable(text: str) -> None:
    assert redact(text) == text


def test_the_context_hides_pairs_multiindex_and_short_secret_columns() -> None:
    import pandas as pd
    pair = describe_variable("conn", ("password", "hunter2hunter2"))
    assert "hunter2hunter2" not in pair and REDACTED in pair
    frame = pd.DataFrame({"user": ["ann", "bob"], "pw": ["s3cretA!", "s3cretB!"]})
    flat = describe_variable("logins", frame)
    assert "s3cret" not in flat and "ann" in flat
    frame.columns = pd.MultiIndex.from_tuples([("acct", "user"), ("acct", "password")])
    multi = describe_variable("logins", frame)
    assert "s3cret" not in multi and "ann" in multi
    series = pd.Series(["s3cretA!"], name=("acct", "pw"))
    assert "s3cret" not in describe_variable("col", series)


def test_known_credentials_are_replaced_wherever_they_occur() -> None:
    token = secrets.token_urlsafe(32)
    redactor = Redactor([token, "short"])
    out = redactor(f"url?x={token}&y=1 and {token[:-1]} short")
    assert out == f"url?x={REDACTED}&y=1 and {token[:-1]} short"
    assert re.search(r"\[redacted\]", redactor(f"embedded{token}embedded"))
