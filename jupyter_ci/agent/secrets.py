"""Recognise secret-looking names and scrub secret-looking values out of text sent to a model."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

REDACTED = "[redacted]"

# Words that make a name secret wherever they appear in it.
_SECRET_WORDS = frozenset({
    "secret", "secrets", "password", "passwords", "passwd", "pwd", "passphrase",
    "credential", "credentials", "creds", "cred", "auth", "authorization", "oauth",
    "cookie", "cookies", "sessionid", "privkey", "apikey", "webhook", "dsn", "jwt", "bearer",
    "pw", "pword", "passcode",
})
# Run-together spellings with no separator to split on (`apiKey` splits, `APIKEY` does not).
_SECRET_FRAGMENTS = (
    "apikey", "accesskey", "secretkey", "privatekey", "authtoken", "accesstoken",
    "refreshtoken", "bearertoken", "sessiontoken", "clientsecret", "password", "passwd",
    "passphrase", "csrftoken", "xsrftoken",
)
# `token` names a secret unless a neighbour makes it a count, an id or an NLP vocabulary item.
_TOKEN_NEIGHBOURS = frozenset({
    "max", "min", "n", "num", "total", "input", "output", "prompt", "completion", "count",
    "counts", "len", "length", "id", "ids", "idx", "index", "type", "types", "limit", "budget",
    "usage", "eos", "bos", "pad", "unk", "sep", "cls", "mask", "start", "end", "special",
    "new", "first", "last", "next", "per", "reasoning", "cached", "vocab", "span", "pos",
})
# `key` names a secret at the end of a name (`openai_key`, `KEY_ID` aside) unless it is a data key.
_DATA_KEY_QUALIFIERS = frozenset({
    "sort", "primary", "foreign", "join", "group", "groupby", "partition", "cache", "dict",
    "index", "lookup", "merge", "unique", "composite", "row", "column", "col", "hash", "range",
    "map", "on", "by", "natural", "surrogate", "compound", "shard", "sharding", "cluster",
    "music", "piano", "legend", "color", "colour", "plot", "style", "match", "dedup", "pk", "fk",
})
# `pass` ends many password names (`db_pass`) but also counts runs (`first_pass`, `n_pass`).
_PASS_QUALIFIERS = frozenset({
    "first", "second", "third", "last", "next", "forward", "backward", "n", "num", "single",
    "multi", "one", "two", "by", "low", "high", "band", "all", "each", "fail", "boarding",
})
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _words(name: str) -> list[str]:
    """Split snake_case, kebab-case, camelCase and CONSTANT_CASE names into lowercase words."""
    return [w.lower() for w in _WORD.findall(name)]


def _token_is_secret(words: list[str], i: int) -> bool:
    """Tell whether the word `token` at position i names a credential rather than a count."""
    neighbours = set(words[max(0, i - 1):i]) | set(words[i + 1:i + 2])
    return not neighbours & _TOKEN_NEIGHBOURS


def _key_is_secret(words: list[str], i: int) -> bool:
    """Tell whether the word `key` at position i names a credential rather than a data key."""
    if words[i + 1:] not in ([], ["id"]):
        return False
    return not (i > 0 and words[i - 1] in _DATA_KEY_QUALIFIERS)


@functools.lru_cache(maxsize=4096)  # the same names come back in every ask
def is_secret_name(name: str) -> bool:
    """Tell whether a variable or field name looks like it holds a credential."""
    squashed = re.sub(r"[^a-z0-9]", "", name.lower())
    if any(fragment in squashed for fragment in _SECRET_FRAGMENTS):
        return True
    words = _words(name)
    for i, word in enumerate(words):
        if word in _SECRET_WORDS:
            return True
        if word == "token" and _token_is_secret(words, i):
            return True
        if word == "key" and _key_is_secret(words, i):
            return True
        if word == "pass" and i == len(words) - 1 and not set(words[i - 1:i]) & _PASS_QUALIFIERS:
            return True
    return False


# Each pattern matches a whole credential; group "keep", when present, is kept verbatim. A
# pattern only runs when one of its lowercase triggers is in the text: most text has none.
_VALUE_PATTERNS: list[tuple[tuple[str, ...], re.Pattern[str]]] = [
    # PEM and PGP private keys, also cut short (reprs get truncated) and with `\n` escaped.
    (("private key",), re.compile(
        r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]*?-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=:\s\\-]*)"
    )),
    # Package registry tokens in any form (detect-secrets knows only PyPI's full prefix and
    # npm tokens inside an .npmrc line).
    (("npm_",), re.compile(r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")),
    (("pypi-",), re.compile(r"(?<![A-Za-z0-9])pypi-[A-Za-z0-9_-]{50,}")),
    # Signed URLs: the signature and credential parameters of S3, GCS, Azure SAS, CloudFront.
    (("x-amz-", "x-goog-", "sig=", "signature=", "key-pair-id="), re.compile(
        r"(?P<keep>[?&](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|"
        r"X-Goog-Signature|X-Goog-Credential|sig|Signature|Key-Pair-Id|Policy)=)[^&\s\"'#<>]+",
        re.IGNORECASE,
    )),
    # `curl -u user:password`, `--user user:password`.
    (("-u", "--user"), re.compile(
        r"(?P<keep>(?<![\w-])(?:-u|--user)(?:\s+|=)[\"']?[^\s:\"']+:)[^\s\"']+"
    )),
    # OpenAI, Anthropic and similar `sk-` keys: long, and random enough to contain a digit.
    (("sk-",), re.compile(r"(?<![A-Za-z0-9])sk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{16,}")),
    (("k_live_", "k_test_"), re.compile(r"(?<![A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{10,}")),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
     re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}")),
    (("github_pat_",), re.compile(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}")),
    (("glpat-",), re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,}")),
    (("hf_",), re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}")),
    (("akia", "asia"), re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])")),
    (("aiza",), re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}")),
    (("xox",), re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}")),
    (("eyj",), re.compile(
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    )),
    # An Authorization header's value, whatever its scheme (Basic base64 looks like a word).
    (("authorization",), re.compile(
        r"(?P<keep>\bAuthorization[\"']?\s*[:=]\s*[\"']?(?:(?:Bearer|Basic|Digest|Token|Bot)\s+)?)"
        r"[^\s\"',;}]+",
        re.IGNORECASE,
    )),
    (("bearer",), re.compile(
        r"(?P<keep>\b[Bb]earer\s+)"
        r"(?:(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,}|[A-Za-z0-9._~+/=-]{24,})"
    )),
    # Credentials in a URL: scheme://user:password@host.
    (("://",), re.compile(
        r"(?P<keep>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://)"
        r"[^/\s:@'\"]+:[^/\s@'\"]+@"
    )),
]
_ANY_TRIGGER = re.compile("|".join(re.escape(t) for ts, _ in _VALUE_PATTERNS for t in ts))
# Every secret name contains one of these stems; text without any needs no assignment scan.
_ANY_NAME_STEM = re.compile(
    "secret|pass|pw|cred|auth|cookie|session|key|token|webhook|dsn|jwt|bearer"
)


def _replace_value(match: re.Match[str]) -> str:
    """Keep the `keep` group of a credential match and redact the rest."""
    keep = match.groupdict().get("keep") or ""
    tail = "@" if match.group(0).endswith("@") and "://" in keep else ""
    return keep + REDACTED + tail


# `name = value`, `name: value`, `"name": "value"`, `?name=value&`, `name=["value"]`:
# the name decides.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63})(?P<q1>[\"']?\]?)"
    r"(?P<sep>\s*(?:=|:)\s*)"
    r"(?:(?P<open>[\[(]\s*)?(?:\"(?P<dquoted>[^\"\n]*)\"|'(?P<squoted>[^'\n]*)')"
    r"|(?P<bare>[^\s&,;'\"()\[\]{}<>]+))"
)
# Bare (unquoted) values that are code or placeholders, not a secret: leave them readable.
_HARMLESS_BARE = re.compile(
    r"(?:None|null|nil|true|false|True|False|str|bytes|int|dict|list|tuple|Any|Optional|Union|"
    r"SecretStr|SecretBytes|os\.environ|os\.getenv|getpass(?:\.getpass)?|input|\*+|"
    r"Bearer|Basic|Digest|Token|Bot)",
)


def _assignment_replacement(match: re.Match[str]) -> str | None:
    """Give the redacted form of an assignment whose name looks secret, or None to leave it."""
    name = match.group("name").rsplit(".", 1)[-1]
    if not is_secret_name(name):
        return None
    head = match.group("name") + match.group("q1") + match.group("sep")
    for group, quote in (("dquoted", '"'), ("squoted", "'")):
        quoted = match.group(group)
        if quoted is not None:
            if not quoted or quoted == REDACTED:
                return None
            return f"{head}{match.group('open') or ''}{quote}{REDACTED}{quote}"
    bare = match.group("bare")
    following = match.string[match.end():match.end() + 1]
    # `password=getpass()`, `token: str`, `key=cfg[...]` are code, not the secret itself.
    if _HARMLESS_BARE.fullmatch(bare) or following in ("(", "["):
        return None
    return head + REDACTED


def _redact_assignments(text: str) -> str:
    """Redact secret-named assignments; a non-secret match is rescanned from its separator."""
    pieces: list[str] = []
    done = start = 0
    while (match := _ASSIGNMENT.search(text, start)) is not None:
        replacement = _assignment_replacement(match)
        if replacement is None:
            # The value may hold the next assignment (`url=https://h/?token=x`): look inside it.
            start = match.end("name")
            continue
        pieces += [text[done:match.start()], replacement]
        done = start = match.end()
    return "".join(pieces) + text[done:]


# A 2-tuple whose first item names a secret: `("password", "hunter2")` (dict items, pairs of
# settings). Lists are left alone (`df[["pw", "user"]]` lists columns), and so are bare
# `key`/`token`, common first items of ordinary pairs.
_PAIR = re.compile(
    r"(?P<keep>\(\s*(?P<q>[\"'])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63})(?P=q)\s*,\s*)"
    r"(?P<q2>[\"'])(?P<value>[^\"'\n]+)(?P=q2)(?=\s*\))"
)
_WEAK_NAMES = frozenset({"key", "keys", "token", "tokens"})


def _replace_pair(match: re.Match[str]) -> str:
    """Redact the second item of a pair whose first item is a secret's name."""
    name = match.group("name")
    if name.lower() in _WEAK_NAMES or not is_secret_name(name):
        return match.group(0)
    return f"{match.group('keep')}{match.group('q2')}{REDACTED}{match.group('q2')}"


_MIN_DETECTED = 8  # shorter matches are parts of words, not keys


def detected_secrets(text: str) -> set[str]:
    """Return the credentials detect-secrets' regex plugins find in `text`, line by line."""
    # The maintained rules (cloud, chat, payment and registry keys), cached (secret_rules.py).
    from jupyter_ci.secret_rules import rules

    found: set[str] = set()
    for line in text.splitlines():
        for rule in rules():
            found.update(s for s in rule.find(line) if len(s) >= _MIN_DETECTED)
    return found


def redact(text: str) -> str:
    """Replace credentials and secret-named values in free text with `[redacted]`."""
    lowered = text.lower()
    if _ANY_TRIGGER.search(lowered):
        for triggers, pattern in _VALUE_PATTERNS:
            if any(trigger in lowered for trigger in triggers):
                text = pattern.sub(_replace_value, text)
    # After our own patterns, which take a private key block whole.
    for secret in sorted(detected_secrets(text), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    if _ANY_NAME_STEM.search(lowered):
        text = _PAIR.sub(_replace_pair, _redact_assignments(text))
    return text


#: Known credentials shorter than this are not replaced wherever they occur (too many false hits).
MIN_KNOWN_LENGTH = 8


class Redactor:
    """Redact the process's own credentials (always, anywhere) and secret-looking text."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        # Longest first, so a credential that contains another is replaced whole.
        self.known = sorted({k for k in known if len(k) >= MIN_KNOWN_LENGTH}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """Return `text` with credentials replaced by `[redacted]`."""
        for value in self.known:
            if value in text:
                text = text.replace(value, REDACTED)
        return redact(text)
