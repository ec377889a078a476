"""The HTTP handler of one file of a REST session: download, upload (streamed), delete."""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from typing import Any, TypeVar

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from tornado import web

from jupyter_ci.server.sessions import files
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.handlers import Refused, SessionAPIHandler
from jupyter_ci.wire.codec import encode

T = TypeVar("T")
#: Bytes tornado may read past the upload limit, so the handler sees the overflow.
_OVERFLOW_BYTES = 1024 * 1024


@web.stream_request_body
class FileHandler(SessionAPIHandler):
    """GET (download), PUT (upload, raw body) or DELETE one file of a session."""

    _upload: files.Upload | None = None
    _too_large = False
    _body_read = False

    async def prepare(self) -> None:  # type: ignore[override]
        """Judge an upload on its headers, before a byte of its body is read."""
        await super().prepare()
        if self.request.method != "PUT" or self._finished:
            return
        user = self.current_user
        if not user or not await ensure_async(self.authorizer.is_authorized(
                self, user, "write", self.auth_resource)):
            raise web.HTTPError(403, "Not allowed to upload to jupyter-ci sessions.")
        limit = self.ci.max_upload_bytes
        try:
            if int(self.request.headers.get("Content-Length") or 0) > limit:
                raise Refused(413, "upload_too_large", _too_large(limit))
            self._upload = _file_op(self.path_kwargs["path"], files.Upload,
                                    self._target(), limit)
        except (SessionError, ValueError) as error:
            return self.fail(error if isinstance(error, SessionError) else Refused(
                400, "bad_request", "The Content-Length header is not a number."))
        # Past the limit tornado drops the connection with no answer; a chunk's worth above
        # it, data_received sees the overflow first and answers 413.
        self.request.connection.set_max_body_size(  # type: ignore[union-attr]
            limit + _OVERFLOW_BYTES)

    def data_received(self, chunk: bytes) -> None:
        """Write the upload as it arrives; past the limit, drop it and answer 413 now."""
        if self._upload is not None and not self._too_large:
            try:
                self._too_large = not self._upload.write(chunk)
            except OSError as error:  # a full disk: answer now, keep nothing
                self._upload.abort()
                self._upload, self._too_large = None, True
                return self.fail(_refusal(self.path_kwargs["path"], error))
            if self._too_large and not self._finished:
                self._upload.abort()
                self._upload = None
                self.fail(Refused(413, "upload_too_large", _too_large(self.ci.max_upload_bytes)))

    def _target(self) -> files.Target:
        directory = self.manager.directory(self.path_kwargs["sid"])
        return _file_op(self.path_kwargs["path"], files.resolve, directory,
                        self.path_kwargs["path"])

    @web.authenticated
    @authorized
    async def put(self, sid: str, path: str) -> None:
        """Put the uploaded file in place and describe it."""
        self._body_read = True  # tornado calls put() once the whole body has arrived
        if self._finished:  # refused while it arrived (too large, a full disk)
            return
        upload, self._upload = self._upload, None
        if upload is None:
            return self.fail(Refused(400, "bad_request", "Nothing was uploaded."))
        if self._too_large:
            return self.fail(Refused(413, "upload_too_large",
                                     _too_large(self.ci.max_upload_bytes)))
        try:
            self.manager.directory(sid)  # not deleted while uploading
            described = _file_op(path, upload.commit)
        except SessionError as error:
            upload.abort()
            return self.fail(error)
        self.set_status(201)
        self.finish(json.dumps(encode(described)))

    @web.authenticated
    @authorized
    async def get(self, sid: str, path: str) -> None:
        """Send the file's bytes (as an attachment: never rendered on Jupyter's origin)."""
        try:
            file = _file_op(path, files.open_file, self._target())
        except SessionError as error:
            return self.fail(error)
        self.set_header("Content-Type", "application/octet-stream")
        self.set_header("Content-Disposition", "attachment")
        self.set_header("X-Content-Type-Options", "nosniff")
        with file:
            async for chunk in files.chunks(file):
                self.write(chunk)
                await self.flush()
        # Jupyter's APIHandler.finish says JSON unless told (an empty file sends no bytes, so
        # its headers go out only there).
        self.finish(set_content_type="application/octet-stream")

    @web.authenticated
    @authorized
    async def delete(self, sid: str, path: str) -> None:
        """Remove the file."""
        try:
            _file_op(path, files.remove, self._target())
        except SessionError as error:
            return self.fail(error)
        self.set_status(204)
        self.finish()

    def finish(self, chunk: Any = None, **kwargs: Any) -> Any:
        """Say "Connection: close" when an upload is refused before its body was read."""
        # Tornado then drops the connection rather than read the body, but only decides so
        # after the headers went out: a keep-alive client would send its next request on
        # the dead connection and get a reset.
        if self.request.method == "PUT" and not self._body_read and not self._headers_written:
            self.set_header("Connection", "close")
        return super().finish(chunk, **kwargs)

    def on_finish(self) -> None:
        """Drop an upload that never completed (refused, or the client hung up)."""
        if self._upload is not None:
            self._upload.abort()
            self._upload = None


def _file_op(path: str, fn: Callable[..., T], *args: Any) -> T:
    """Call an operation of files.py; map what it refuses to the API's errors."""
    try:
        return fn(*args)
    except files.PathRefused as error:
        raise Refused(400, "bad_path", str(error)) from None
    except files.NoSuchFile as error:
        raise Refused(404, "no_such_file", str(error)) from None
    except files.FilesUnsupported as error:
        raise Refused(409, "files_unavailable", str(error)) from None
    except OSError as error:  # the system refuses (permissions, a full disk, a race)
        raise _refusal(path, error) from None


def _refusal(path: str, error: OSError) -> Refused:
    """Map what the system refused: a full disk is 507, a file past its size limit 413."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return Refused(507, "insufficient_storage", f"{path!r} could not be written: no "
                       "space is left on the disk of the session's directory (or its quota is "
                       "used up). Nothing was kept; delete files or ask the server's admin.")
    if error.errno == errno.EFBIG:
        return Refused(413, "upload_too_large", f"{path!r} could not be written: the file is "
                       "larger than this system lets the server write. Nothing was kept.")
    return Refused(400, "file_error", f"{path!r}: {error.strerror or error}.")


def _too_large(limit: int) -> str:
    return f"The upload is over {limit} bytes (c.JupyterCI.max_upload_bytes)."
