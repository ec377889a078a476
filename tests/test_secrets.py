"""Secret names are recognised and secret values scrubbed, without eating ordinary data."""

from __future__ import annotations

import time

import pytest

from jupyter_ci.agent.secrets import REDACTED, is_secret_name, redact

# Fake credentials are assembled at run time so the test file itself never looks like a leak
# to secret scanners (GitHub push protection and the like).
RANDOM = "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY"
OPENAI = "sk-" + RANDOM + "zz9"
OPENAI_PROJ = "sk-proj-" + RANDOM + "_-Q1"
ANTHROPIC = "sk-ant-api03-" + RANDOM + "-" + RANDOM
GITHUB = "gh" + "p_" + RANDOM + "1234"
GITHUB_PAT = "github" + "_pat_" + "11ABCDEFG0" + "_" + RANDOM
AWS_ID = "AK" + "IA" + "IOSFODNN7EXAMPLE"
SLACK = "xo" + "xb-" + "1234567890-" + RANDOM
HF = "h" + "f_" + RANDOM + "abc"
GOOGLE = "AI" + "za" + "SyA" + RANDOM
STRIPE = "sk" + "_live_" + RANDOM
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
       + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + RANDOM + "\n" + RANDOM
       + "==\n-----END RSA PRIVATE KEY-----")


@pytest.mark.parametrize("name", [
    "API_KEY", "api_key", "apiKey", "APIKEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "openai_key",
    "key", "KEY", "secret", "SECRET", "client_secret", "AWS_SECRET_ACCESS_KEY",
    "aws_access_key_id", "token", "TOKEN", "hf_token", "HF_TOKEN", "GITHUB_TOKEN", "authToken",
    "access_token", "refresh_token", "slack_bot_token", "password", "PASSWORD", "db_password",
    "passwd", "pwd", "DB_PASS", "pass", "passphrase", "credential", "credentials", "creds",
    "GOOGLE_APPLICATION_CREDENTIALS", "private_key", "privateKey", "ssh_key", "auth",
    "basic_auth", "Authorization", "session_cookie", "cookies", "sessionid", "csrftoken",
    "x-api-key", "SLACK_WEBHOOK", "database_dsn", "jwt", "my_secrets",
])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "tokenizer", "n_tokens", "max_tokens", "num_tokens", "token_count", "token_ids", "tokens",
    "input_tokens", "eos_token", "pad_token", "next_token", "keys", "keyword", "keywords",
    "key_col", "sort_key", "primary_key", "join_key", "groupby_key", "monkey", "turkey",
    "hotkeys", "author", "authors", "secretary", "compass", "first_pass", "pass_rate",
    "passenger_count", "df", "df2", "data", "x", "n", "model", "url", "session", "user",
    "username", "bypass", "key_value_pairs", "api_version", "public_url",
])
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize("secret", [
    OPENAI, OPENAI_PROJ, ANTHROPIC, GITHUB, GITHUB_PAT, AWS_ID, SLACK, HF, GOOGLE, STRIPE, JWT,
])
def test_known_key_formats_are_redacted_anywhere(secret: str) -> None:
    for text in (secret, f"key is {secret}.", f"'{secret}'", f"[{secret!r}, 1]", f"x={secret}"):
        out = redact(text)
        assert secret not in out
        assert REDACTED in out


def test_no_long_fragment_of_a_key_survives() -> None:
    out = redact(f"client = OpenAI(api_key='{ANTHROPIC}')")
    assert RANDOM[:8] not in out


def test_pem_private_key_block() -> None:
    out = redact(f"before\n{PEM}\nafter")
    assert RANDOM not in out and "before" in out and "after" in out
    # A repr cut off before its END line, with newlines escaped, is still caught.
    cut = repr(PEM)[:60]
    assert RANDOM[:10] not in redact(cut)


@pytest.mark.parametrize(("text", "gone", "kept"), [
    ("Authorization: Bearer abc123def456ghi789", "abc123def456ghi789", "Authorization: Bearer"),
    ("headers = {'Authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz", "Authorization"),
    ("curl -H 'authorization: token 0123456789abcdef'", "0123456789abcdef", "curl"),
    ("use bearer 9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706", "use bearer"),
    ("postgresql://bob:hunter2@db.example.com:5432/sales", "hunter2", "db.example.com:5432/sales"),
    ("https://user:p%40ss@example.com/x", "p%40ss", "example.com/x"),
    ("password=hunter2", "hunter2", "password="),
    ("PASSWORD = 'correct horse battery'", "correct horse", "PASSWORD = '"),
    ('password = "it\'s me, 42"', "it's me", 'password = "'),
    ("db_pass: s3cr3t!", "s3cr3t!", "db_pass:"),
    ("token: abcdef", "abcdef", "token:"),
    ('{"api_key": "abc123", "rows": 10}', "abc123", '"rows": 10'),
    ("{'password': 'hunter2', 'user': 'bob'}", "hunter2", "'user': 'bob'"),
    ("https://api.example.com/v1?token=abc123&page=2", "abc123", "page=2"),
    ('os.environ["DB_PASSWORD"] = "hunter2"', "hunter2", "os.environ"),
    ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI",
     "export"),
    ("connect(user='bob', password='hunter2', port=5432)", "hunter2", "port=5432"),
    ("client_secret = 'f3a9c2b1e8d74a6b9c0d1e2f3a4b5c6d'", "f3a9c2b1e8d7", "client_secret"),
    ("self.api_key = 'abc-123-def'", "abc-123-def", "self.api_key"),
    ('pd.DataFrame({"user": ["ann"], "password": ["hunter2"]})', "hunter2", '"user": ["ann"]'),
])
def test_secret_assignments_and_headers(text: str, gone: str, kept: str) -> None:
    out = redact(text)
    assert gone not in out
    assert kept in out
    assert REDACTED in out


@pytest.mark.parametrize("text", [
    "",
    "x = 42",
    "df = pd.read_csv('sales.csv')",
    "mean=3.14159, std=2.71828, n=1000000",
    "https://example.com/path?page=2&sort=asc",
    "https://github.com/jupyter/notebook@main",
    "git commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "max_tokens=100, n_tokens: 512",
    "tokenizer = AutoTokenizer.from_pretrained('gpt2')",
    "sort_key = 'date'",
    "risk-adjusted returns; task-1234567890123456",
    "sklearn, sk-learn, ask-me-anything",
    "Basic statistics of the bearer bonds dataset",
    "Bearer tokens are described in RFC 6750",
    "password = getpass.getpass()",
    "api_key = os.environ['OPENAI_API_KEY']",
    "def login(user: str, password: str | None = None) -> bool:",
    "token = None",
    "key: str",
    "email: bob@example.com",
    "ftp://example.com:21/pub",
    "a:b@c is not a URL",
    '{"names": ["ann", "bob"], "keys": ["k1"]}',
])
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact(text) == text


def test_redacted_text_is_stable() -> None:
    once = redact(f"password='x1', token={OPENAI}, url=https://u:p@h/x")
    assert redact(once) == once


def test_long_unbroken_text_is_fast() -> None:
    # Backtracking on long words must stay linear: a 1 MB base64 blob, a long identifier.
    blob = "QUJD" * 250_000
    start = time.perf_counter()
    redact(blob)
    redact("a" * 200_000 + "=x")
    redact("http" * 100_000)
    assert time.perf_counter() - start < 2.0
