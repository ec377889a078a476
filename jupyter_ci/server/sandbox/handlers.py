"""HTTP handlers of a notebook's box, for the page (thin): its status, unboxing, allowing hosts.

Behind Jupyter's authentication and authorizer (resource `jupyter_ci`: reading is `read`,
a change `write`) and its XSRF check, so a web page the user visits can change nothing. The
work is notebooks.py's and choices.py's.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from jupyter_ci.server.jsonbody import BadJSON, parse_json
from jupyter_ci.server.sandbox.notebooks import UNBOX_COMMAND, NotebookBoxes
from jupyter_ci.wire.box import BoxAllow, BoxChoice, BoxNotebook
from jupyter_ci.wire.codec import WireError, decode, encode
from jupyter_ci.wire.rest import ErrorReply

T = TypeVar("T")
BASE = "/jupyter-ci/box"
#: Largest body taken, in bytes.
MAX_BODY = 16 << 10


class BoxHandler(APIHandler):
    """Shared set-up: the boxes, reading a body, errors as the panel reads them."""

    auth_resource = "jupyter_ci"

    def initialize(self, boxes: NotebookBoxes) -> None:
        """Keep the notebook boxes."""
        self.boxes = boxes

    def refuse(self, status: int, reason: str, message: str) -> None:
        """Answer an error the page can show."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(encode(ErrorReply(message, reason))))

    def body(self, cls: type[T]) -> T | None:
        """Read the body as `cls`, or answer 400 and return None."""
        if len(self.request.body) > MAX_BODY:
            self.refuse(413, "too_large", f"The body is over {MAX_BODY} bytes.")
            return None
        try:
            value = decode(cls, parse_json(self.request.body))
        except (BadJSON, WireError) as err:
            self.refuse(400, "bad_field", f"The body is {err}." if isinstance(err, BadJSON)
                        else f"{err}.")
            return None
        path = getattr(value, "path", "")
        if not path.strip("/") or ".." in path.split("/"):
            self.refuse(400, "bad_field", "'path' (the notebook's path, relative to "
                        "Jupyter's root) is required.")
            return None
        return value

    def answer(self, value: Any) -> None:
        """Answer a wire object as JSON."""
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(encode(value)))

    def notebook(self, path: str) -> BoxNotebook:
        """Return the user's choices for one notebook."""
        choices = self.boxes.choices
        return BoxNotebook(path.strip("/"), not choices.unboxed(path),
                           tuple(choices.hosts(path)))


class StatusHandler(BoxHandler):
    """GET whether a kernel runs in a box, what it may reach and was refused."""

    @web.authenticated
    @authorized
    def get(self) -> None:
        """Answer BoxStatus for ?kernel=<id>."""
        kernel = self.get_query_argument("kernel", "")
        status = self.boxes.status(kernel) if kernel else None
        if status is None:
            self.refuse(404, "no_kernel", f"There is no kernel {kernel!r} on this server.")
            return
        self.answer(status)


class NotebookHandler(BoxHandler):
    """PUT whether one notebook's kernels run boxed (from their next start)."""

    @web.authenticated
    @authorized
    def put(self) -> None:
        """Take {"path", "boxed"}; answer BoxNotebook."""
        body = self.body(BoxChoice)
        if body is None:
            return
        setting = self.boxes.setting()
        if not body.boxed and setting == "always":
            self.refuse(409, "boxes_required", f"This server runs every notebook in a box "
                        f"(c.JupyterCI.notebook_sandbox = 'always', or the JupyterHub's "
                        f"policy): '{UNBOX_COMMAND}' is not offered here.")
            return
        self.boxes.choices.set_boxed(body.path, body.boxed)
        self.answer(self.notebook(body.path))


class HostsHandler(BoxHandler):
    """POST a host one notebook's boxes may reach, now and later."""

    @web.authenticated
    @authorized
    def post(self) -> None:
        """Take {"path", "host"}; answer BoxNotebook."""
        body = self.body(BoxAllow)
        if body is None:
            return
        try:
            self.boxes.allow(body.path, body.host.strip())
        except ValueError as err:
            self.refuse(400, "bad_host", f"{err}.")
            return
        self.answer(self.notebook(body.path))


def box_routes(boxes: NotebookBoxes) -> list[tuple[str, type[web.RequestHandler],
                                                   dict[str, Any]]]:
    """Return the routes of notebooks' boxes."""
    kwargs: dict[str, Any] = {"boxes": boxes}
    return [(BASE, StatusHandler, kwargs), (f"{BASE}/notebook", NotebookHandler, kwargs),
            (f"{BASE}/hosts", HostsHandler, kwargs)]
