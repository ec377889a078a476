"""Provider keys from places no process environment holds: a private key file, the keyring.

Precedence, per variable: the server's environment, then `c.JupyterCI.key_file` (or
`$JUPYTER_CI_KEY_FILE`, else `<jupyter data dir>/jupyter_ci/keys.json`), then the keyring
(`keyring.get_password("jupyter-ci", VAR)`, only when the optional `keyring` package is
installed). Only the providers' key and URL variables are read. No message here ever
contains a value. Keys remembered from the panel are written as a JSON object; hand-written
`NAME=value` files are read too, split at line feeds only.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import stat
import threading
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path

from jupyter_ci import providers
from jupyter_ci.server.jsonbody import BadJSON, parse_json
from jupyter_ci.wire.names import DATA_FOLDER

#: The keyring service name; the user name is the variable (OPENAI_API_KEY).
KEYRING_SERVICE = "jupyter-ci"
#: Seconds to wait for a keyring backend (D-Bus, a locked wallet) before going on without it.
KEYRING_TIMEOUT = 5.0
_MAX_BYTES = 1 << 20
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class KeyFileError(Exception):
    """A key file that is unsafe, unreadable or malformed (the message names no value)."""


def provider_variables() -> list[str]:
    """Return the names a key file may set: every provider's key and URL variable."""
    names = (var for spec in providers.configurable() for var in (spec.key_var, spec.url_var))
    return [name for name in names if name]


def stored_keys(key_file: str, environ: Mapping[str, str], log: logging.Logger) -> dict[str, str]:
    """Return provider variables missing from `environ`, from the key file, then the keyring."""
    found: dict[str, str] = {}
    if key_file:
        path = Path(key_file).expanduser()
        try:
            found = read_key_file(path, log)
        except KeyFileError as err:
            # Logged, not raised: a failing extension would leave keys in the kernels' env.
            log.error("jupyter-ci: %s", err)
        else:
            log.info("jupyter-ci: read %s from the key file %s", ", ".join(found) or "nothing",
                     path)
    key_vars = [spec.key_var for spec in providers.configurable() if spec.key_var]
    wanted = [name for name in key_vars if not environ.get(name, "").strip() and name not in found]
    from_keyring = keyring_keys(wanted, log)
    if from_keyring:
        log.info("jupyter-ci: read %s from the keyring", ", ".join(from_keyring))
    return {**found, **from_keyring}


def default_key_file() -> Path:
    """Where keys pasted in the panel are remembered when no key file is configured."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / DATA_FOLDER / "keys.json"


def legacy_key_file() -> Path:
    """Where keys were remembered before they were written as JSON (NAME=value lines)."""
    return default_key_file().with_name("keys.env")


def key_file_to_read(configured: str) -> str:
    """The key file to read at start: the configured one, else keys.json, else keys.env."""
    if configured:
        return configured
    found = (path for path in (default_key_file(), legacy_key_file()) if path.is_file())
    return str(next(found, ""))


def remember_keys(path: Path, values: Mapping[str, str]) -> None:
    """Set `values` in the private key file at `path` (made 0600 if new; others kept).

    Written whole, as a JSON object in ASCII (so no value can ever hold a raw line break
    or separator), to a new private file that replaces the old one: no reader ever sees
    half a file and the mode is right before a key is in it. A new default file starts
    with what the legacy keys.env held, which is no longer read once keys.json exists.
    """
    source = path
    if not path.exists() and path == default_key_file() and legacy_key_file().is_file():
        source = legacy_key_file()
    current = parse_key_file(_read_private(source), source) if source.exists() else {}
    merged = {name: value for name, value in {**current, **values}.items() if value}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = json.dumps(merged, ensure_ascii=True, indent=1) + "\n"
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_key_file(path: Path, log: logging.Logger) -> dict[str, str]:
    """Read provider variables from a private JSON or NAME=value file; warn about others."""
    values = parse_key_file(_read_private(path), path)
    known = provider_variables()
    for name in values:
        if name not in known:
            shown = name if _NAME.fullmatch(name) else "a name that is not a variable name"
            log.warning("jupyter-ci: %s: ignoring %s, not a provider variable (known: %s)",
                        path, shown, ", ".join(known))
    return {name: value for name, value in values.items() if name in known and value}


def parse_key_file(text: str, path: Path) -> dict[str, str]:
    """Parse a JSON object of strings, or `.env`-style `NAME=value` lines."""
    if text.lstrip().startswith("{"):
        try:
            data = parse_json(text.encode("utf-8", "surrogatepass"))
        except BadJSON as err:
            # Its own words and a position only: the text itself holds keys.
            raise KeyFileError(f"{path}: {err}") from None
        bad = [k for k, v in data.items() if not isinstance(v, str)]
        if bad:
            raise KeyFileError(f"{path}: the value of {bad[0]} must be a string")
        return {k: v.strip() for k, v in data.items()}
    # "\n" only: str.splitlines() also splits on U+2028, U+0085, \v, \f and \x1c-\x1e, so a
    # value holding one (a pasted URL) would become a second variable.
    lines = (line.removesuffix("\r") for line in text.split("\n"))
    return dict(_env_line(line, n, path) for n, line in enumerate(lines, 1)
                if line.strip() and not line.lstrip().startswith("#"))


def _env_line(line: str, number: int, path: Path) -> tuple[str, str]:
    """Split one `[export ]NAME=value` line, unquoting the value."""
    name, sep, value = line.strip().removeprefix("export ").partition("=")
    name = name.strip()
    if not sep or not _NAME.fullmatch(name):
        # Never echo the line: it may be a bare key.
        raise KeyFileError(f"{path}, line {number}: expected NAME=value")
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    else:
        value = value.split(" #", 1)[0].rstrip()
    if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in value):
        raise KeyFileError(f"{path}, line {number}: the value of {name} holds a control, "
                           "line-separator or invisible character; retype it as plain text")
    return name, value


def _read_private(path: Path) -> str:
    """Read the file if it is a regular file of this user that nobody else can access."""
    try:
        # O_NONBLOCK: a FIFO must not hang the server's start; checked on the open file.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise KeyFileError(f"Cannot read the key file {path}: {err.strerror}") from None
    try:
        _check_private(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as file:
        data = file.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise KeyFileError(f"The key file {path} is larger than 1 MiB; is it the right file?")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise KeyFileError(f"The key file {path} is not UTF-8 text") from None


def _check_private(path: Path, info: os.stat_result) -> None:
    """Raise KeyFileError unless `info` is a regular file, ours, private to us."""
    if not stat.S_ISREG(info.st_mode):
        raise KeyFileError(f"The key file {path} is not a regular file")
    if os.name == "nt":
        return  # POSIX modes say nothing on Windows; the file's ACL is not checked.
    if info.st_uid != os.geteuid():
        raise KeyFileError(
            f"Refusing the key file {path}: it belongs to uid {info.st_uid}, not to the user "
            f"running Jupyter (uid {os.geteuid()}). Make it yours and private: "
            f"chown {os.geteuid()} {path} && chmod 600 {path}"
        )
    if info.st_mode & 0o077:
        raise KeyFileError(
            f"Refusing the key file {path}: group or others can access it (mode "
            f"{stat.S_IMODE(info.st_mode):03o}). Make it private: chmod 600 {path}"
        )


def keyring_keys(
    names: Iterable[str], log: logging.Logger, timeout: float = KEYRING_TIMEOUT
) -> dict[str, str]:
    """Ask the optional keyring for `names`; give up on a missing package, error or timeout."""
    wanted = list(names)
    found: dict[str, str] = {}
    if not wanted:
        return found

    def lookup() -> None:
        try:
            keyring = importlib.import_module("keyring")
        except ImportError:
            return  # optional: no package, no keyring
        try:
            for name in wanted:
                value = keyring.get_password(KEYRING_SERVICE, name)
                if value and value.strip():
                    found[name] = value.strip()
        except Exception as err:  # any backend failure: the keyring is only a fallback
            level = logging.DEBUG if type(err).__name__ == "NoKeyringError" else logging.WARNING
            log.log(level, "jupyter-ci: the keyring could not be read (%s: %s)",
                    type(err).__name__, err)

    # A daemon thread: a backend stuck on D-Bus or a password prompt must not hold the server.
    thread = threading.Thread(target=lookup, name="jupyter-ci-keyring", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        log.warning("jupyter-ci: the keyring did not answer within %g s; going on without it",
                    timeout)
        return {}
    return found
