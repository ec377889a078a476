"""What the sessions' handlers answer besides their work: the token hint, a 405's Allow."""

from __future__ import annotations

from tornado import web

#: What a request without the server's token, or with a wrong one, is told (not tornado's
#: "'_xsrf' argument missing from POST", which sends people looking for cookies).
NO_TOKEN = ("Forbidden: missing or invalid token. Send the Jupyter server's token as the header "
            "`Authorization: token <token>`: scripts/lab.sh prints it once the server answers; "
            "else it is $JUPYTER_TOKEN where the server started, or `jupyter server list` "
            "shows it.")


def allowed_methods(handler: type[web.RequestHandler]) -> str:
    """Return the `Allow` header of a 405: the methods the handler's class implements."""
    base = web.RequestHandler
    return ", ".join(m for m in handler.SUPPORTED_METHODS if m not in ("HEAD", "OPTIONS")
                     and getattr(handler, m.lower()) is not getattr(base, m.lower()))
