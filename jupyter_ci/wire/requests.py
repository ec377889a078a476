"""The REST API's request bodies that have a fixed shape (server/openapi.json names them).

The server reads each with the codec, strictly; what a value may hold beyond its type (a
directory's name, the variables a session may set) the server checks after.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NewSession:
    """POST /jupyter-ci/api/sessions: every field optional."""

    #: A kernelspec name; omitted: the server's default.
    kernel_name: str | None = None
    #: Extra environment variables of the session's kernel.
    env: dict[str, str] | None = None
    #: A plain name for the session's directory.
    cwd_name: str | None = None
    #: The language of the session's kernel ("python", "bash", "typescript", "r").
    language: str | None = None
