"""Why the broker refuses a request (a credential, a key, a body); each carries its HTTP status.

Messages are written here, in our words: never a key, a token, or an upstream library's
exception text (which may hold URLs and headers).
"""

from __future__ import annotations


class BrokerError(Exception):
    """A request the broker refuses; `status` is the HTTP status to answer."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(BrokerError):
    """The request (a pasted key or URL) cannot be used as it is."""

    status = 400


class BadBrokerToken(BrokerError):
    """The request did not carry the broker token of a running kernel of this server."""

    status = 403


class UnknownProvider(BrokerError):
    """The model names a provider the broker holds nothing for."""

    status = 404


class NoProviderKey(BrokerError):
    """The server was started without a usable key or URL for this provider."""

    status = 401


class BodyTooLarge(BrokerError):
    """The request body is larger than c.JupyterCI.broker_max_body_bytes."""

    status = 413
