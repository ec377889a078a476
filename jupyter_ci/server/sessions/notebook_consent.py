"""Whether agents may change one of the user's notebooks (`c.JupyterCI.agent_notebooks`).

The consent is the user's: given by opening the notebook in JupyterLab during this server's
run (the page says so: `POST /jupyter-ci/notebooks/opened`), or for good, one notebook at a
time (`PUT /jupyter-ci/notebooks/consent`, kept in a 0600 file in Jupyter's data directory,
outside every notebook and box). Nothing in a notebook's own file grants it, so a notebook
someone sent cannot let agents in. Notebooks are known by their file id where the server has
one (jupyter_server_fileid, which collaboration loads: a renamed notebook keeps its consent),
and by their path too.

This guards the user's notebooks against an agent that wanders, not against one that holds
the user's token: that token reaches Jupyter's own kernel API, which runs anything.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.wire.notebooks import ConsentSetting, ConsentWhy

#: The file name of the allowed notebooks, in Jupyter's data directory by default.
FILE_NAME = "jupyter-ci-agent-notebooks.json"
#: The command that allows one notebook, as the page names it.
ALLOW_COMMAND = "Let agents edit and run this notebook"


class NotAllowed(SessionError):
    """The user has not let agents change this notebook."""

    status, reason = 403, "agents_not_allowed"


def default_file() -> Path:
    """Return where the allowed notebooks are kept unless a setting says otherwise."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / FILE_NAME


@dataclass
class Consent:
    """The notebooks agents may change: by the setting, by opening, by the user's allow."""

    setting: ConsentSetting
    file: Path
    file_ids: Any = None  # jupyter_server_fileid's manager, when the server has one
    opened: set[str] = field(default_factory=set)
    _allowed: set[str] | None = None

    def keys(self, path: str, index: bool = False) -> list[str]:
        """Return the names a notebook is known by: its file id (if any) and its path."""
        path = path.strip("/")
        keys = [f"path:{path}"]
        if self.file_ids is not None:
            file_id = self.file_ids.index(path) if index else self.file_ids.get_id(path)
            if file_id:
                keys.insert(0, f"id:{file_id}")
        return keys

    def why(self, path: str, shown: bool = False) -> tuple[bool, ConsentWhy]:
        """Return whether agents may change the notebook, and the reason's name; `shown`:
        the change is made only once an open page of the user's shows it (notebook_run.py)."""
        if self.setting in ("always", "never"):
            return self.setting == "always", self.setting
        keys = self.keys(path)
        if any(key in self.allowed() for key in keys):
            return True, "allowed"
        if self.setting == "opened" and (shown or any(key in self.opened for key in keys)):
            return True, "opened"
        return False, "not_opened" if self.setting == "opened" else "not_allowed"

    def check(self, path: str, shown: bool = False) -> None:
        """Refuse, saying how to allow it, when agents may not change the notebook."""
        allowed, why = self.why(path, shown)
        if allowed:
            return
        if why == "never":
            raise NotAllowed(f"Agents may not change any notebook on this server "
                             f"(c.JupyterCI.agent_notebooks = 'never'); {path} is unchanged.")
        first = "has not opened it in JupyterLab since this server started, nor allowed it" \
            if why == "not_opened" else "has not allowed it (c.JupyterCI.agent_notebooks = " \
            "'allowed')"
        raise NotAllowed(f"Agents may not change {path}: its user {first}. Ask the user to "
                         + ("open it in JupyterLab, or to " if why == "not_opened" else "")
                         + f"run the command '{ALLOW_COMMAND}' in it; nothing changed.")

    def saw_opened(self, path: str) -> None:
        """Remember that the user opened the notebook in a page of this server."""
        self.opened.update(self.keys(path, index=True))

    def allow(self, path: str, allowed: bool) -> None:
        """Allow agents in one notebook for good, or take that back (and the opening's)."""
        keys = self.keys(path, index=allowed)
        kept = self.allowed()
        if allowed:
            kept.update(keys)
        else:
            kept.difference_update(keys)
            self.opened.difference_update(keys)
        self._save(kept)

    def allowed(self) -> set[str]:
        """Return the notebooks allowed one by one (read from the file once)."""
        if self._allowed is None:
            try:
                found = json.loads(self.file.read_text()).get("allowed", [])
            except (OSError, ValueError, AttributeError):
                found = []
            self._allowed = {k for k in found if isinstance(k, str)}
        return self._allowed

    def _save(self, allowed: set[str]) -> None:
        """Write the allowed notebooks: the user's alone to read (0600), replaced whole."""
        self.file.parent.mkdir(parents=True, exist_ok=True)
        partial = self.file.with_name(self.file.name + ".partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({"allowed": sorted(allowed)}, out)
        os.replace(partial, self.file)
        self._allowed = allowed
