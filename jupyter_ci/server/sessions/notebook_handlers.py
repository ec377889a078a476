"""HTTP handlers of the notebook door: agents' cells in the user's own notebooks (thin).

Behind Jupyter's authentication and authorizer (resource `jupyter_ci`: reading is `read`,
every change `write`), bodies read strictly as wire/notebooks.py's classes. With Jupyter's
real-time collaboration in the server, the work is notebook_door.py's (no page needed);
without it, only `run` with `code` works, through a page that has the notebook open
(notebook_run.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar, cast

from jupyter_server.auth.decorator import authorized
from tornado import web

from jupyter_ci.server.sessions import shared_doc
from jupyter_ci.server.sessions.fields import Refused, names_of, read_body, timeout_of
from jupyter_ci.server.sessions.handlers import SessionAPIHandler
from jupyter_ci.server.sessions.notebook_consent import Consent, default_file
from jupyter_ci.server.sessions.notebook_door import NotebookDoor
from jupyter_ci.server.sessions.notebook_run import kernel_of, run_in_notebook
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.notebooks import (
    ConsentSetting,
    NotebookConsent,
    NotebookConsentChange,
    NotebookEdit,
    NotebookInsert,
    NotebookOpened,
    NotebookRun,
)

T = TypeVar("T")
BASE = "/jupyter-ci/notebooks"
#: The server's settings key of the one Consent (made at the first request that needs it).
CONSENT = "jupyter_ci_agent_consent"
#: The server's settings key of the broker's marking of kernels that ran model code.
MARK = "jupyter_ci_mark_model_code"


def _path(body: object) -> None:
    path = body.get("path") if isinstance(body, dict) else None
    if not isinstance(path, str) or not path.strip("/"):
        raise Refused(400, "bad_field", "'path' (the notebook's path, relative to Jupyter's "
                      "root) is required.")


def _timeout(body: object) -> None:
    timeout_of(body if isinstance(body, dict) else {})


class NotebookHandler(SessionAPIHandler):
    """Shared set-up: the door, the consent, reading a body."""

    def read(self, cls: type[T]) -> T:
        """Read the body as `cls`, refusing unknown fields and malformed values."""
        body = self.fields(names_of(cls))
        _path(body)
        return read_body(cls, body, {"path": _path, "timeout": _timeout})

    def consent(self) -> Consent:
        """Return the server's one Consent."""
        found = self.settings.get(CONSENT)
        if not isinstance(found, Consent):
            path = self.ci.agent_notebooks_file
            # The trait is an Enum of exactly these values.
            found = Consent(cast(ConsentSetting, self.ci.agent_notebooks),
                            Path(path) if path else default_file(),
                            self.settings.get("file_id_manager"))
            self.settings[CONSENT] = found
        return found

    def door(self) -> NotebookDoor:
        """Return the door over this server."""
        mark = self.settings.get(MARK)
        return NotebookDoor(self.serverapp, self.consent(),
                            mark if callable(mark) else (lambda _kernel: None))

    def check_code(self, code: str) -> None:
        """Refuse empty code and code over c.JupyterCI.max_code_bytes."""
        if not code.strip():
            raise Refused(400, "bad_field", "'code' (a non-empty string) is required.")
        if len(code.encode()) > self.ci.max_code_bytes:
            raise Refused(413, "code_too_large", f"The code is over "
                          f"{self.ci.max_code_bytes} bytes (c.JupyterCI.max_code_bytes).")

    def answer(self, value: Any, status: int = 200) -> None:
        """Answer a wire object (or JSON value) as JSON."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(value if isinstance(value, dict) else encode(value)))


class CellsHandler(NotebookHandler):
    """GET a notebook's cells; POST an agent's new cell; PATCH a cell's source."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """Answer NotebookCells for ?path=."""
        path = self.get_query_argument("path", "")
        _path({"path": path})
        self.answer(await self.door().read(path))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Insert {"path", "source", "index"?, "cell_type"?}; answer NotebookCellChanged."""
        body = self.read(NotebookInsert)
        self.answer(await self.door().insert(body.path, body.source, body.index,
                                             body.cell_type), 201)

    @web.authenticated
    @authorized
    async def patch(self) -> None:
        """Replace {"path", "cell", "source"}; answer NotebookCellChanged."""
        body = self.read(NotebookEdit)
        self.answer(await self.door().edit(body.path, body.cell, body.source))


class RunHandler(NotebookHandler):
    """POST code to run as a new cell at the notebook's end, or a cell to run as it is."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Run {"path", "code" | "cell", "timeout"?}; answer the Execution with the cell."""
        raw = self.fields(names_of(NotebookRun))
        body = self.read(NotebookRun)
        if (body.code is None) == (body.cell is None):
            raise Refused(400, "bad_field", "Give exactly one of 'code' (a new cell's code) "
                          "and 'cell' (the id or index of a cell to run).")
        if body.code is not None:
            self.check_code(body.code)
        timeout = timeout_of(raw) or self.ci.timeout
        if shared_doc.collaboration(self.serverapp) is not None:
            self.answer(await self.door().run(body.path, body.code, body.cell, timeout))
            return
        if body.code is None:
            raise shared_doc.needs_collaboration("Running a notebook's own cell")
        self.consent().check(body.path, shown=True)  # a page must show the cell first
        kernel_id = await kernel_of(self.session_manager, body.path)
        self.answer(await run_in_notebook(self.kernel_manager, kernel_id, body.path,
                                          body.code, timeout))


class OpenedHandler(NotebookHandler):
    """POST that the user opened a notebook in a page of this server (their consent)."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Take {"path"}; answer 204."""
        body = self.read(NotebookOpened)
        real = await shared_doc.notebook_path(self.contents_manager, body.path)
        self.consent().saw_opened(real)
        self.set_status(204)
        self.finish()


class ConsentHandler(NotebookHandler):
    """GET whether agents may change a notebook; PUT the user's allow, or its withdrawal."""

    def _state(self, path: str) -> NotebookConsent:
        allowed, why = self.consent().why(path)
        return NotebookConsent(path, allowed, why, self.consent().setting)

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """Answer NotebookConsent for ?path=."""
        path = self.get_query_argument("path", "")
        _path({"path": path})
        self.answer(self._state(await shared_doc.notebook_path(self.contents_manager, path)))

    @web.authenticated
    @authorized
    async def put(self) -> None:
        """Take {"path", "allow"}; answer NotebookConsent."""
        body = self.read(NotebookConsentChange)
        real = await shared_doc.notebook_path(self.contents_manager, body.path)
        self.consent().allow(real, body.allow)
        self.answer(self._state(real))


def notebook_routes(session: dict[str, Any]) -> list[tuple[str, type[web.RequestHandler],
                                                          dict[str, Any]]]:
    """Return the notebook door's routes."""
    return [(f"{BASE}/cells", CellsHandler, session), (f"{BASE}/run", RunHandler, session),
            (f"{BASE}/opened", OpenedHandler, session),
            (f"{BASE}/consent", ConsentHandler, session)]
