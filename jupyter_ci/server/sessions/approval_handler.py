"""The route that answers an ask's approvals (thin: the work is in approvals.py)."""

from __future__ import annotations

import json

from jupyter_server.auth.decorator import authorized
from tornado import web

from jupyter_ci.server.sessions.fields import names_of
from jupyter_ci.server.sessions.handlers import SessionAPIHandler
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.requests import ApprovalAnswer


class ApprovalsHandler(SessionAPIHandler):
    """GET the questions that wait in a session; POST the answer to one."""

    @web.authenticated
    @authorized
    def get(self, sid: str) -> None:
        """List the waiting_for_user events that wait (to answer them from elsewhere)."""
        self.finish(json.dumps(encode(self.manager.get(sid).approvals.listing())))

    @web.authenticated
    @authorized
    def post(self, sid: str) -> None:
        """Answer {"approval_id", "decision": run/edit/skip/stop, "code"?, "plan"?}."""
        body = self.fields(names_of(ApprovalAnswer))
        answered = self.manager.get(sid).approvals.answer(self.user(), body)
        self.finish(json.dumps(encode(answered)))
