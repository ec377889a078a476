"""Why a request about sessions cannot be done; each error carries its HTTP status and reason."""

from __future__ import annotations


class SessionError(Exception):
    """A request about sessions that cannot be done; `status` and `reason` go to the client."""

    status = 400
    reason = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownSession(SessionError):
    """No session has this id (never created, deleted, or culled when idle)."""

    status, reason = 404, "unknown_session"


class TooManySessions(SessionError):
    """c.JupyterCI.max_sessions exist already."""

    status, reason = 429, "too_many_sessions"


class KernelUnavailable(SessionError):
    """The kernel could not be started or did not become ready."""

    status, reason = 503, "kernel_unavailable"


class CannotSandbox(SessionError):
    """c.JupyterCI.session_sandbox is "always" and this session cannot be boxed here."""

    status, reason = 503, "sandbox_unavailable"


class SandboxRequired(SessionError):
    """A box can run here, and the kernel asked for has no sandboxed kernelspec."""

    status, reason = 400, "sandbox_required"


class FilesElsewhere(SessionError):
    """The session's kernel runs where this server's disk is not (a remote gateway)."""

    status, reason = 409, "files_unavailable"


class GatewayUnreachable(SessionError):
    """The gateway that runs the session's kernel does not answer (gateway_health.py)."""

    status, reason = 503, "gateway_unreachable"


class KernelGone(SessionError):
    """The gateway answers but no longer has the session's kernel (it restarted without it)."""

    status, reason = 410, "kernel_gone"
