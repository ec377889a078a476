"""What the sessions' handlers answer besides their work: the token hint, a 405's Allow."""

from __future__ import annotations

import os

from tornado import web

#: What a request without the server's token, or with a wrong one, is told (not tornado's
#: "'_xsrf' argument missing from POST", which sends people looking for cookies).
NO_TOKEN = ("Forbidden: missing or invalid token. Send the Jupyter server's token as the header "
            "`Authorization: token <token>`: scripts/lab.sh prints it once the server answers; "
            "else it is $JUPYTER_TOKEN where the server started, or `jupyter server list` "
            "shows it.")


#: The same, on a server JupyterHub started: its token is the Hub's, and lab.sh is not it.
HUB_NO_TOKEN = ("Forbidden: missing or invalid token. This server runs under JupyterHub: send "
                "a JupyterHub API token of yours (the Hub's Token page, /hub/token, with access "
                "to this server) as the header `Authorization: token <token>`.")


def no_token() -> str:
    """Return what a request without a valid token is told, here."""
    # JupyterHub's spawners set these for the single-user server (the token itself is
    # withheld from os.environ once read: server/app.py).
    under_hub = any(os.environ.get(name) for name in ("JUPYTERHUB_API_URL",
                                                      "JUPYTERHUB_SERVICE_PREFIX"))
    return HUB_NO_TOKEN if under_hub else NO_TOKEN


def allowed_methods(handler: type[web.RequestHandler]) -> str:
    """Return the `Allow` header of a 405: the methods the handler's class implements."""
    base = web.RequestHandler
    return ", ".join(m for m in handler.SUPPORTED_METHODS if m not in ("HEAD", "OPTIONS")
                     and getattr(handler, m.lower()) is not getattr(base, m.lower()))
