"""The asynchronous client: `AsyncClient` and `AsyncSession`, method for method the sync ones."""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from jupyter_ci.client.formats import (
    SERVER_DEFAULT,
    Approving,
    EventData,
    OnApproval,
    OnOutput,
    OnText,
    Stream,
    Tools,
    aevents,
    answer_body,
    approvals_of,
    ask_body,
    auth_headers,
    body_of,
    code_of,
    execute_body,
    executions_of,
    files_of,
    gave_up,
    http_timeout,
    info_of,
    raise_for,
    read,
    tool_result,
)
from jupyter_ci.client.results import Execution
from jupyter_ci.client.sync import Timeout
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.requests import Execute
from jupyter_ci.wire.rest import ApprovalReply, FileEntry
from jupyter_ci.wire.shapes import (
    ApprovalReplyJSON,
    FileEntryJSON,
    SessionInfoJSON,
    WaitingForUserJSON,
    shape_of,
)


async def _checked(response: httpx.Response) -> httpx.Response:
    """Raise the server's error of a streamed reply (read first), else return it."""
    if not response.is_success:
        await response.aread()
        raise_for(response)
    return response


class AsyncSession(Tools):
    """The async form of Session (same methods, awaited); `async with` deletes it.

    Giving up works as in Session, and a cancelled task hangs up too: the server interrupts
    the run it was waiting for.
    """

    def __init__(self, http: httpx.AsyncClient, info: Mapping[str, object]) -> None:
        #: The session's info as the server said it (SessionInfo's fields, and any newer);
        #: attaching by id alone, {"id": ...} (refresh() reads the rest).
        self.info: Mapping[str, object] = info
        self.http, self.id = http, str(info["id"])
        self._base = f"jupyter-ci/sessions/{self.id}"
        self._answered: set[str] = set()  # approvals answered through this object

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.delete()

    @property
    def cwd(self) -> str | None:
        """The session's working directory on the server (as its info said)."""
        cwd = self.info.get("cwd")
        return cwd if isinstance(cwd, str) else None

    async def execute(self, code: str, *, timeout: Timeout = SERVER_DEFAULT,
                      envs: dict[str, str] | None = None, language: str | None = None,
                      on_stdout: OnText | None = None,
                      on_stderr: OnText | None = None, on_output: OnOutput | None = None
                      ) -> Execution:
        """Run code as Session.execute does; callbacks may be `async def` (they are awaited)."""
        streamed = Stream(on_stdout, on_stderr, on_output)
        return (await self._execute(code, timeout, envs, streamed, language))[0]

    async def execute_cells(self, cells: Sequence[str], *, timeout: Timeout = SERVER_DEFAULT,
                            envs: dict[str, str] | None = None, language: str | None = None,
                            on_stdout: OnText | None = None,
                            on_stderr: OnText | None = None,
                            on_output: OnOutput | None = None) -> list[Execution]:
        """Run cells as Session.execute_cells does (callbacks may be `async def`)."""
        streamed = Stream(on_stdout, on_stderr, on_output)
        return await self._execute(list(cells), timeout, envs, streamed, language)

    async def _execute(self, code: str | list[str], timeout: Timeout,
                       envs: dict[str, str] | None, stream: Stream,
                       language: str | None = None) -> list[Execution]:
        """POST an execute: one JSON reply, or its events when there are callbacks."""
        body = execute_body(code, timeout, envs, language)
        limit = http_timeout(self.http.timeout, timeout, 1 if isinstance(code, str) else len(code))
        try:
            if not stream.listens:
                response = await self.http.post(f"{self._base}/execute", json=encode(body),
                                                timeout=limit)
                raise_for(response)
                return executions_of(response.json())
            return await self._stream(body, limit, stream)
        except httpx.TimeoutException as error:
            raise gave_up(error) from error

    async def _stream(self, body: Execute, limit: httpx.Timeout, stream: Stream
                      ) -> list[Execution]:
        """Run a streaming execute, awaiting the callbacks that are coroutines."""
        async with self.http.stream("POST", f"{self._base}/execute", json=encode(body),
                                    timeout=limit,
                                    headers={"Accept": "text/event-stream"}) as response:
            await _checked(response)
            async for event, data in aevents(response.aiter_lines()):
                for called in stream.take(event, data):
                    if inspect.isawaitable(called):
                        await called
        return stream.executions()

    async def ask(self, prompt: str, *, approve: str | None = None,
                  on_approval: OnApproval | None = None, **options: Any
                  ) -> AsyncIterator[tuple[str, EventData]]:
        """Ask the model; yield its events as they come, ending with ("ask_end", result).

        ("result", result), the same data, follows (a deprecated alias). Approval as in
        Session.ask; `on_approval` may be `async def` (it is awaited).
        """
        gate = Approving(on_approval)
        async with self.http.stream("POST", f"{self._base}/ask",
                                    json=ask_body(prompt, approve, options)) as response:
            await _checked(response)
            async for event, data in aevents(response.aiter_lines()):
                decision = gate.take(event, data)
                if inspect.isawaitable(decision):
                    decision = await decision
                if decision is not None:
                    await self.approve(str(data["approval_id"]), decision)
                yield event, data
                gate.answered |= self._answered
                gate.check()

    async def approve(self, approval_id: str, decision: Any = "run", *,
                      code: str | None = None, plan: str | None = None) -> ApprovalReplyJSON:
        """Answer a question by its approval_id: run, edit (`code` or `plan`), skip or stop."""
        body = answer_body(approval_id, decision, code, plan)
        response = await self.http.post(f"{self._base}/approvals", json=encode(body))
        raise_for(response)
        self._answered.add(approval_id)
        return shape_of(read(ApprovalReply, response.json()))

    async def approvals(self) -> list[WaitingForUserJSON]:
        """List the questions (waiting_for_user events) that wait in this session."""
        response = await self.http.get(f"{self._base}/approvals")
        raise_for(response)
        return approvals_of(response.json())

    async def refresh(self) -> SessionInfoJSON:
        """Read the session's info again (status, executions, cwd) and return it."""
        response = await self.http.get(self._base)
        raise_for(response)
        self.info = info = info_of(response.json())
        return info

    async def upload(self, path: str, data: bytes | str | os.PathLike[str]) -> FileEntryJSON:
        """Put a file into the session's directory; return its listing entry."""
        response = await self.http.put(f"{self._base}/files/{path}", content=body_of(data))
        raise_for(response)
        return shape_of(read(FileEntry, response.json()))

    async def download(self, path: str) -> bytes:
        """Return a file's bytes."""
        response = await self.http.get(f"{self._base}/files/{path}")
        raise_for(response)
        return response.content

    async def files(self) -> list[FileEntryJSON]:
        """List the session's files (path, size, mime)."""
        response = await self.http.get(f"{self._base}/files")
        raise_for(response)
        return files_of(response.json())

    async def remove(self, path: str) -> None:
        """Delete a file."""
        raise_for(await self.http.delete(f"{self._base}/files/{path}"))

    async def restart(self) -> None:
        """Restart the kernel: variables cleared, files kept."""
        response = await self.http.post(f"{self._base}/restart")
        raise_for(response)
        self.info = info_of(response.json())

    async def notebook(self) -> dict[str, Any]:
        """Return the session's history as an nbformat v4 notebook."""
        response = await self.http.get(f"{self._base}/notebook")
        raise_for(response)
        return dict(response.json())

    async def delete(self) -> None:
        """Shut the kernel down and remove the directory (an already deleted one is fine)."""
        response = await self.http.delete(self._base)
        if response.status_code != 404:
            raise_for(response)

    async def run_tool_call(self, call: Any, *, timeout: Timeout = SERVER_DEFAULT) -> Any:
        """Run a model's tool call; return its result in that provider's format."""
        provider, call_id, code = code_of(call)
        return tool_result(provider, call_id, await self.execute(code, timeout=timeout))


class AsyncClient:
    """The async form of Client (same arguments, the same methods awaited)."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 300.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        headers = auth_headers(token)
        self.http = httpx.AsyncClient(base_url=url.rstrip("/") + "/", headers=headers,
                                      timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def session(self, session_id: str | None = None, **options: Any) -> AsyncSession:
        """Start a session, or attach to one by id (see Client.session)."""
        if session_id is not None:
            response = await self.http.get(f"jupyter-ci/sessions/{quote(session_id, safe='')}")
        else:
            response = await self.http.post("jupyter-ci/sessions", json=options)
        raise_for(response)
        return AsyncSession(self.http, info_of(response.json()))

    async def sessions(self) -> list[SessionInfoJSON]:
        """List the server's sessions."""
        response = await self.http.get("jupyter-ci/sessions")
        raise_for(response)
        return [info_of(s) for s in response.json()]

    async def close(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()
