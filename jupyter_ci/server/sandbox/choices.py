"""The user's box choices for their notebooks: unboxed ones, and the hosts each may reach.

Kept where the agents' consent is (Jupyter's data directory, mode 0600, outside every
notebook and box), never in a notebook's file: a notebook someone sent cannot unbox itself
or open the network. Notebooks are known by their path, and by their file id where the
server has one (a renamed notebook keeps its choices).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_ci.server.sandbox.allowlist import parse_rule

#: The file name of the choices, in Jupyter's data directory by default.
FILE_NAME = "jupyter-ci-notebook-boxes.json"
#: Hosts one notebook may be allowed at most (a page cannot grow the file without bound).
MAX_HOSTS = 64


def default_file() -> Path:
    """Return where the choices are kept unless a setting says otherwise."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / FILE_NAME


@dataclass
class Choices:
    """The notebooks the user runs unboxed, and the hosts each notebook's box may reach."""

    file: Path
    file_ids: Any = None  # jupyter_server_fileid's manager, when the server has one
    _unboxed: set[str] = field(default_factory=set)
    _hosts: dict[str, list[str]] = field(default_factory=dict)
    _read: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def keys(self, path: str) -> list[str]:
        """Return the names a notebook is known by: its file id (if any) and its path."""
        path = path.strip("/")
        keys = [f"path:{path}"]
        if self.file_ids is not None:
            file_id = self.file_ids.get_id(path)
            if file_id:
                keys.insert(0, f"id:{file_id}")
        return keys

    def unboxed(self, path: str) -> bool:
        """Tell whether the user chose to run this notebook unboxed."""
        self._load()
        return any(key in self._unboxed for key in self.keys(path))

    def hosts(self, path: str) -> list[str]:
        """Return the hosts the user allowed this notebook's box, in the order allowed."""
        self._load()
        found = [host for key in self.keys(path) for host in self._hosts.get(key, [])]
        return list(dict.fromkeys(found))

    def set_boxed(self, path: str, boxed: bool) -> None:
        """Run the notebook's kernels boxed (the default) or unboxed, from their next start."""
        with self._lock:
            self._load()
            keys = self._index(path)
            if boxed:
                self._unboxed.difference_update(keys)
            else:
                self._unboxed.update(keys)
            self._save()

    def allow(self, path: str, host: str) -> None:
        """Let the notebook's box reach `host`; ValueError if it is no allowlist entry."""
        parse_rule(host)  # raises, naming the entry, before anything is kept
        with self._lock:
            self._load()
            key = self._index(path)[0]
            kept = self._hosts.setdefault(key, [])
            if host not in kept:
                if len(kept) >= MAX_HOSTS:
                    raise ValueError(f"this notebook already has {MAX_HOSTS} hosts allowed")
                kept.append(host)
            self._save()

    def _index(self, path: str) -> list[str]:
        """Return a notebook's keys, giving it a file id if the server indexes files."""
        if self.file_ids is not None:
            self.file_ids.index(path.strip("/"))
        return self.keys(path)

    def _load(self) -> None:
        """Read the file once; a missing or damaged one holds no choices."""
        if self._read:
            return
        try:
            found = json.loads(self.file.read_text())
        except (OSError, ValueError):
            found = {}
        if not isinstance(found, dict):
            found = {}
        unboxed, hosts = found.get("unboxed", []), found.get("hosts", {})
        self._unboxed = {k for k in unboxed if isinstance(k, str)} \
            if isinstance(unboxed, list) else set()
        self._hosts = {k: [h for h in v if isinstance(h, str)][:MAX_HOSTS]
                       for k, v in hosts.items() if isinstance(k, str) and isinstance(v, list)} \
            if isinstance(hosts, dict) else {}
        self._read = True

    def _save(self) -> None:
        """Write the choices: the user's alone to read (0600), replaced whole."""
        self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = self.file.with_name(self.file.name + ".partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({"unboxed": sorted(self._unboxed), "hosts": self._hosts}, out)
        os.replace(partial, self.file)
