"""What a boxed kernel inherits: a short list of variables, and which paths its box hides.

A kernel outside a box inherits the server's whole environment; in a box it gets only what a
kernel needs (locale, PATH, Python's own variables, Jupyter's session name, jupyter-ci's
broker variables), the kernelspec's own variables, and those a REST session asked for by
name. Its HOME is its private /tmp: no configuration or credentials of the user come in.
"""

from __future__ import annotations

import os
from pathlib import Path

from jupyter_ci.wire.names import DATA_FOLDER, RECORD_SECRET

#: The host path of the broker's private socket, published by the server for boxes.
ENV_BROKER_SOCKET = "JUPYTER_CI_SANDBOX_BROKER"
#: Host paths (os.pathsep-separated) the server wants hidden: its root, the sessions, keys.
ENV_HIDE = "JUPYTER_CI_SANDBOX_HIDE"
#: Names (comma-separated) of variables a REST session asked for (its `env`), kept as given.
ENV_PASS = "JUPYTER_CI_SANDBOX_PASS"
#: "1" for a REST session's kernel: it signs no ask records, so it gets no record secret.
ENV_SESSION = "JUPYTER_CI_SANDBOX_SESSION"
INTERNAL = frozenset({ENV_BROKER_SOCKET, ENV_HIDE, ENV_PASS, ENV_SESSION})
#: Told by the server to a sandboxed kernel's provisioner in the kernel's start env (and sent
#: with a gateway kernel's start); never in the server's own os.environ.
PUBLISHED = (ENV_BROKER_SOCKET, ENV_HIDE)
#: The provisioner's entry point name, which a sandboxed kernelspec's metadata names.
PROVISIONER = "jupyter-ci-sandbox"

#: What glibc ignores for setuid programs (its unsecvars.h): variables that make the loader
#: or libc load or read files. bubblewrap and prlimit start OUTSIDE the box with the
#: kernel's environment, so none of these may reach them, whoever asks.
LOADER_UNSAFE = frozenset({
    "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE",
    "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR",
})


def unsafe(name: str) -> bool:
    """Tell a variable that would load or read files in a program started with it."""
    return name.startswith(("LD_", "GLIBC_TUNABLES")) or name in LOADER_UNSAFE


KEEP = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONIOENCODING",
    "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS", "MPLBACKEND",
    "JPY_SESSION_NAME",
})
KEEP_PREFIXES = ("LC_", "JUPYTER_CI_")
#: Places in a home folder where credentials live, hidden should the box show the folder.
HOME_SECRETS = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker",
                ".netrc", ".pgpass", ".git-credentials", ".config/gh", ".jupyter",
                ".local/share/jupyter", ".ipython", ".bash_history", ".python_history",
                ".cache/pip")


def box_environ(env: dict[str, str], spec_env: dict[str, str]) -> dict[str, str]:
    """Return the variables of `env` a boxed kernel gets, its HOME and TMPDIR set to /tmp."""
    asked = {name for name in env.get(ENV_PASS, "").split(",") if name}
    inner = {name: value for name, value in env.items()
             if name not in INTERNAL and not unsafe(name)
             and (name in KEEP or name.startswith(KEEP_PREFIXES) or name in spec_env
                  or name in asked)}
    inner.update(HOME="/tmp", TMPDIR="/tmp")
    return inner


def published(env: dict[str, str], name: str) -> str:
    """Return a variable the server published: from the kernel's start, else this process."""
    return env.get(name) or os.environ.get(name, "")


def hidden_paths(env: dict[str, str]) -> tuple[Path, ...]:
    """Return what a box must never show: Jupyter's folders, credentials, the server's own."""
    from jupyter_core.paths import jupyter_config_dir, jupyter_data_dir, jupyter_runtime_dir

    home = Path(env.get("HOME") or os.path.expanduser("~"))
    paths: list[str | Path] = [jupyter_runtime_dir(), jupyter_data_dir(), jupyter_config_dir(),
             *(home / secret for secret in HOME_SECRETS),
             *(path for path in published(env, ENV_HIDE).split(os.pathsep) if path)]
    return tuple(dict.fromkeys(Path(os.path.realpath(path)) for path in paths))


def record_secret(env: dict[str, str]) -> Path | None:
    """Return the user's ask-record secret for a notebook's box (None for a REST session).

    `%%ask` in a boxed notebook kernel signs its records with it, so Restart & Run All can
    reuse its answers; read-only, it lets the kernel sign, not change, the secret.
    """
    if env.get(ENV_SESSION) == "1":
        return None
    from jupyter_core.paths import jupyter_data_dir

    path = Path(jupyter_data_dir()) / DATA_FOLDER / RECORD_SECRET
    return path if path.is_file() else None
