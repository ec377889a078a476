"""What a boxed kernel inherits: a short list of variables, and which paths its box hides.

A kernel outside a box inherits the server's whole environment; in a box it gets only what a
kernel needs (locale, PATH, Python's own variables, Jupyter's session name, jupyter-ci's
broker variables), the kernelspec's own variables, and those a REST session asked for by
name. Its HOME is its private /tmp: no configuration or credentials of the user come in.
"""

from __future__ import annotations

import os
from pathlib import Path

from jupyter_ci.record_secret import ensure, secret_path
from jupyter_ci.wire.names import BOXED_VARIABLE

#: The host path of the broker's private socket, published by the server for boxes.
ENV_BROKER_SOCKET = "JUPYTER_CI_SANDBOX_BROKER"
#: Host paths (os.pathsep-separated) the server wants hidden: its root, the sessions, keys.
ENV_HIDE = "JUPYTER_CI_SANDBOX_HIDE"
#: Names (comma-separated) of variables a REST session asked for (its `env`), kept as given.
ENV_PASS = "JUPYTER_CI_SANDBOX_PASS"
#: "1" for a REST session's kernel: it signs no ask records, so it gets no record secret.
ENV_SESSION = "JUPYTER_CI_SANDBOX_SESSION"
#: The server's root directory: read-write in a notebook's box, hidden from a session's.
ENV_ROOT = "JUPYTER_CI_SANDBOX_ROOT"
#: Hosts (comma-separated) the user allowed the notebook's box, told at its start.
ENV_HOSTS = "JUPYTER_CI_SANDBOX_HOSTS"
#: Set in every box, so code there (and `%%ask`) knows it is boxed: "notebook" or "session".
ENV_BOXED = BOXED_VARIABLE
INTERNAL = frozenset({ENV_BROKER_SOCKET, ENV_HIDE, ENV_PASS, ENV_SESSION, ENV_ROOT, ENV_HOSTS})
#: Told by the server to a sandboxed kernel's provisioner in the kernel's start env (and sent
#: with a gateway kernel's start); never in the server's own os.environ.
PUBLISHED = (ENV_BROKER_SOCKET, ENV_HIDE, ENV_ROOT)
#: A boxed spec's metadata key: the kernel is a notebook's, boxed by notebook_sandbox.
NOTEBOOK_BOX = "jupyter_ci_notebook_box"
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
#: Paths under the user's home that hold secrets: absent from every box, whatever a mount
#: above would show (docs/security.md lists them; c.JupyterCI.sandbox_hidden adds more).
HOME_SECRETS = (
    # Keys and credentials of tools.
    ".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker", ".netrc",
    ".git-credentials", ".pypirc", ".pgpass", ".npmrc", ".yarnrc", ".config/gh", ".config/hub",
    ".cargo/credentials", ".cargo/credentials.toml", ".terraform.d", ".s3cfg", ".boto",
    ".config/rclone", ".config/doctl", ".oci", ".databrickscfg", ".config/op", ".vault-token",
    ".huggingface", ".cache/huggingface/token", ".kaggle",
    # Keyrings and password stores.
    ".local/share/keyrings", ".gnome2/keyrings", ".password-store", ".local/share/kwalletd",
    # Browser profiles.
    ".mozilla", ".config/google-chrome", ".config/chromium", ".config/BraveSoftware",
    ".config/microsoft-edge", ".config/vivaldi", ".config/opera", "snap/firefox",
    "snap/chromium", ".var/app",
    # Jupyter's own folders (its runtime folder holds the server's token) and IPython's
    # (startup files run in every kernel).
    ".jupyter", ".local/share/jupyter", ".ipython",
    # Shell and tool histories.
    ".bash_history", ".zsh_history", ".zhistory", ".histfile", ".local/share/fish",
    ".python_history", ".sqlite_history", ".psql_history", ".mysql_history",
    ".node_repl_history", ".lesshst", ".rediscli_history", ".wget-hsts", ".viminfo",
    # A cache a box would otherwise poison for the user's own pip.
    ".cache/pip",
)


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
    path = secret_path()
    try:
        ensure(path)  # the box shows it read-only: the kernel could not make it there
    except OSError:
        return None  # the kernel says it cannot sign, as it would unboxed
    return path if path.is_file() else None
