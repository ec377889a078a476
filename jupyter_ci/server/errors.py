"""Why the key broker refuses or fails a request; each error carries its HTTP status.

Messages are written here, in our words: never a key, a token, or an upstream library's
exception text (which may hold URLs and headers).
"""

from __future__ import annotations


class BrokerError(Exception):
    """A broker request that cannot be forwarded; `status` is the HTTP status to answer."""

    status = 500
    #: The error `type` the provider's SDKs know ("api_error" unless said otherwise).
    kind = "api_error"
    #: Tell the SDKs not to retry: the same request will be refused again.
    final = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(BrokerError):
    """The request cannot be forwarded as it is."""

    status = 400
    kind = "invalid_request_error"
    final = True


class BadBrokerToken(BrokerError):
    """The request did not carry the broker token of a running kernel of this server."""

    status = 403
    kind = "permission_error"
    final = True


class ForbiddenRoute(BrokerError):
    """The method and path are not a model call the provider's route allowlist names."""

    status = 403
    kind = "permission_error"
    final = True


class UnknownProvider(BrokerError):
    """The route names a provider the broker does not serve."""

    status = 404
    kind = "not_found_error"
    final = True


class NoProviderKey(BrokerError):
    """The server was started without a usable key or URL for this provider."""

    status = 401
    kind = "authentication_error"
    final = True


class BodyTooLarge(BrokerError):
    """The request body is larger than c.JupyterCI.broker_max_body_bytes."""

    status = 413
    kind = "request_too_large"
    final = True


class OverBudget(BrokerError):
    """A kernel or the server used up its token budget."""

    status = 429
    kind = "rate_limit_error"
    final = True


class UpstreamUnreachable(BrokerError):
    """The provider could not be reached at all."""

    status = 502


class UpstreamTimeout(BrokerError):
    """The provider stopped answering for longer than the read timeout."""

    status = 504
