"""What the box of a user's notebook kernel gets beyond a REST session's box.

A session's box sees its own folder only. A notebook's box keeps what an analyst uses:

- Jupyter's root directory read-write (the server publishes it: `ENV_ROOT`), the rest of
  the user's home and /opt read-only, with HOME at its real path, so `~/data.csv` works;
- none of the user's secrets: environ.HOME_SECRETS (hidden in every box) and
  `c.JupyterCI.sandbox_hidden` are not there at all, wherever a mount above would show them;
- `%pip install`: a Python kernel runs on an environment of the user's boxes layered over
  its own (box_env.py), where pip installs; caches (pip's, matplotlib's font list) are in a
  folder of the boxes too, so they survive restarts;
- the variables a notebook uses (locale, pip's, conda's, TLS bundles, thread counts) and
  those named in `c.JupyterCI.notebook_environ`; secrets in the environment stay out;
- the GPU device nodes, where the machine has them.

The folder of the boxes is shared by all of the user's boxed kernels and by nothing else:
what one box installs, the others import; no unboxed Python ever reads it.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from configparser import ConfigParser, Error
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from jupyter_ci.server.sandbox.box_env import box_python
from jupyter_ci.server.sandbox.environ import ENV_BOXED, ENV_ROOT
from jupyter_ci.wire.names import DATA_FOLDER

#: Variables of the server a notebook's box keeps, besides environ.KEEP.
KEEP = frozenset({
    "VIRTUAL_ENV", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "NUMEXPR_MAX_THREADS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "USER", "LOGNAME",
    "SHELL", "EDITOR", "PAGER", "JAVA_HOME", "R_HOME", "SPARK_HOME", "HADOOP_HOME",
    "XDG_CONFIG_HOME", "XDG_DATA_HOME",
})
KEEP_PREFIXES = ("PIP_", "CONDA_", "MAMBA_")
#: pip's settings of where it installs, kept only where the box can write.
_PIP_PLACES = ("PIP_TARGET", "PIP_PREFIX", "PIP_ROOT")
#: Parts of a kept name that mark a secret (PIP_INDEX_URL may hold a token: kept, as pip
#: needs it to install; a name like CONDA_TOKEN is not).
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "_KEY", "AUTH")
#: Folders of installed software a notebook's box shows read-only, where they exist.
OPT = tuple(Path(p) for p in ("/opt",) if os.path.isdir(p))
#: PyPI's hosts: its index and where its files are.
PYPI = ("pypi.org", "files.pythonhosted.org")
#: pip's options that name where packages come from.
_INDEX_OPTIONS = ("index-url", "extra-index-url", "find-links")
#: Device nodes of GPUs (NVIDIA's, and DRI's for AMD and Intel).
GPU_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd")


@dataclass(frozen=True)
class NotebookBox:
    """The mounts and variables a notebook's box adds to a session's."""

    readonly: tuple[Path, ...]
    writable: tuple[Path, ...]
    hidden: tuple[Path, ...]
    devices: tuple[Path, ...]
    env: dict[str, str]
    #: The interpreter a Python kernel runs on in the box (box_env.py); None: its own.
    python: Path | None = None


def notebook_box(env: dict[str, str], executable: str, hidden_more: list[str],
                 environ_more: list[str], gpus: bool) -> NotebookBox:
    """Return what the box of a notebook kernel run by `executable` gets beyond a session's."""
    home = _home(env)
    root = env.get(ENV_ROOT, "")
    folder = boxes_folder()
    cache = folder / "cache"
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    python = box_python(executable, env, folder)
    inner = {name: value for name, value in env.items()
             if (name in KEEP or name.startswith(KEEP_PREFIXES) or name in environ_more)
             and (name in environ_more or not _secret(name))}
    path = env.get("PATH", os.defpath)
    inner.update({
        ENV_BOXED: "notebook",
        # pip and the boxes' environment's programs first: `!pip install` installs there too.
        "PATH": os.pathsep.join([str(python.parent), path]) if python else path,
        "PIP_CACHE_DIR": str(cache / "pip"), "XDG_CACHE_HOME": str(cache),
        "MPLCONFIGDIR": env.get("MPLCONFIGDIR") or str(cache / "matplotlib"),
        # IPython's profile (startup files, history) is the box's own: ~/.ipython is hidden.
        "IPYTHONDIR": "/tmp/.ipython",
        # pip would warn at every install that its version check cannot reach the network.
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    })
    if env.get("PYTHONPATH"):
        inner["PYTHONPATH"] = env["PYTHONPATH"]
    if home is not None:
        inner["HOME"] = str(home)
    # /opt too: software installed there (conda, tools) and what pip's config names there.
    readonly = (*((home,) if home is not None else ()), *OPT, *index_paths(env))
    # Never the whole file system: a server whose root is / gives its boxes the notebook's
    # own folder only.
    writable = tuple(Path(os.path.realpath(p)) for p in (root,)
                     if p and os.path.isdir(p) and os.path.realpath(p) != "/")
    _drop_unwritable(inner, writable)
    return NotebookBox(readonly, (*writable, folder), secret_paths(home, hidden_more),
                       gpu_devices() if gpus else (), inner, python)


def _drop_unwritable(inner: dict[str, str], writable: tuple[Path, ...]) -> None:
    """Leave out pip's places the box cannot write: it then installs into the boxes' env."""
    for name in _PIP_PLACES:
        # Outside Jupyter's root it would fail every install.
        if name in inner and not _inside(inner[name], writable):
            del inner[name]


def _inside(path: str, folders: tuple[Path, ...]) -> bool:
    """Tell whether `path` is in one of `folders`."""
    real = os.path.realpath(path)
    return any(os.path.commonpath([real, str(folder)]) == str(folder) for folder in folders)


def secret_paths(home: Path | None, more: list[str]) -> tuple[Path, ...]:
    """Return the paths `c.JupyterCI.sandbox_hidden` adds (a leading ~ is `home`)."""
    found = [Path(str(home) + path[1:]) if home is not None and path.startswith("~")
             else Path(path).expanduser() for path in more]
    return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in found))


def index_hosts(env: dict[str, str]) -> list[str]:
    """Return the allowlist entries of pip's package index, as pip's settings name it.

    pip's variables (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS) and configuration
    files; PyPI's two hosts when no index-url is set. Only http(s) URLs: a file:// index
    needs no network.
    """
    urls: dict[str, list[str]] = {option: [] for option in _INDEX_OPTIONS}
    for option, value in _pip_settings(env):
        urls[option] += value.split()
    entries = [] if urls["index-url"] else list(PYPI)
    for url in (u for option in _INDEX_OPTIONS for u in urls[option]):
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") and parts.hostname:
            default = 443 if parts.scheme == "https" else 80
            host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            port = parts.port or default
            entries.append(host if port in (80, 443) else f"{host}:{port}")
    return list(dict.fromkeys(entries))


def index_paths(env: dict[str, str]) -> tuple[Path, ...]:
    """Return the local folders and files pip's index settings name (a box reads them)."""
    found: list[Path] = []
    for _, value in _pip_settings(env):
        for item in value.split():
            parts = urlsplit(item)
            path = parts.path if parts.scheme == "file" else item if not parts.scheme else ""
            if path and os.path.exists(path):
                found.append(Path(os.path.realpath(path)))
    return tuple(dict.fromkeys(found))


def _pip_settings(env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """Yield pip's index settings: its files' (global, then install sections), then variables."""
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    dirs = (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep)
    files = [Path("/etc/pip.conf"), *(Path(d) / "pip" / "pip.conf" for d in dirs),
             home / ".pip" / "pip.conf",
             Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf"]
    if env.get("VIRTUAL_ENV"):
        files.append(Path(env["VIRTUAL_ENV"]) / "pip.conf")
    if env.get("PIP_CONFIG_FILE"):
        files.append(Path(env["PIP_CONFIG_FILE"]))
    for file in files:
        parser = ConfigParser(interpolation=None)
        try:
            parser.read(file)
        except (Error, OSError, UnicodeDecodeError):
            continue  # pip would refuse it too, and say so
        for section in ("global", "install"):
            for option in _INDEX_OPTIONS:
                if parser.has_option(section, option):
                    yield option, parser.get(section, option)
    for option in _INDEX_OPTIONS:
        value = env.get("PIP_" + option.upper().replace("-", "_"))
        if value:
            yield option, value


def boxes_folder() -> Path:
    """Return the folder of the user's boxes (packages, caches) in Jupyter's data directory."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / DATA_FOLDER / "box"


def gpu_devices() -> tuple[Path, ...]:
    """Return the machine's GPU device nodes (none on a machine without GPUs)."""
    return tuple(Path(p) for pattern in GPU_GLOBS for p in sorted(glob.glob(pattern)))


def _home(env: dict[str, str]) -> Path | None:
    """Return the user's home, unless it is missing or the whole file system."""
    home = Path(os.path.realpath(env.get("HOME") or os.path.expanduser("~")))
    return home if home.is_dir() and home != Path("/") else None


def _secret(name: str) -> bool:
    """Tell a variable whose name says it holds a secret."""
    upper = name.upper()
    return name != "PIP_INDEX_URL" and any(word in upper for word in _SECRET_WORDS)
