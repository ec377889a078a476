"""The synchronous client: `Client` and its `Session`s (the HTTP calls only; formats.py reads)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
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
    ServerDefault,
    Stream,
    Tools,
    answer_body,
    approvals_of,
    ask_body,
    auth_headers,
    body_of,
    code_of,
    events,
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

Timeout = float | ServerDefault | None


class Session(Tools):
    """One session (a kernel and a directory of its own); a context manager that deletes it.

    `execute(code, timeout=...)`: the run is interrupted on the server after `timeout` seconds,
    and the call's read deadline grows to match (a quiet 90 s run with timeout=120 is not cut
    by the client's own timeout); None or 0: no deadline, client or server; not given: the
    server's default (c.JupyterCI.timeout). A call the client gives up on (its timeout raises
    ClientTimeout; Ctrl-C) hangs up, and the server interrupts that run, so the session's next
    call does not wait behind it. `envs` are environment variables for one run, put back after.
    `language` ("python", "r", ...; as E2B's run_code takes it) is checked against the session's
    kernel: another language raises CodeInterpreterError (reason `language_mismatch`), unrun.
    """

    def __init__(self, http: httpx.Client, info: Mapping[str, object]) -> None:
        #: The session's info as the server said it (SessionInfo's fields, and any newer);
        #: attaching by id alone, {"id": ...} (refresh() reads the rest).
        self.info: Mapping[str, object] = info
        self.http, self.id = http, str(info["id"])
        self._base = f"jupyter-ci/sessions/{self.id}"
        self._answered: set[str] = set()  # approvals answered through this object

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    @property
    def cwd(self) -> str | None:
        """The session's working directory on the server (as its info said)."""
        cwd = self.info.get("cwd")
        return cwd if isinstance(cwd, str) else None

    def execute(self, code: str, *, timeout: Timeout = SERVER_DEFAULT,
                envs: dict[str, str] | None = None, language: str | None = None,
                on_stdout: OnText | None = None,
                on_stderr: OnText | None = None, on_output: OnOutput | None = None
                ) -> Execution:
        """Run code (see the class for `timeout` and `envs`); callbacks get output as it comes."""
        streamed = Stream(on_stdout, on_stderr, on_output)
        return self._execute(code, timeout, envs, streamed, language)[0]

    def execute_cells(self, cells: Sequence[str], *, timeout: Timeout = SERVER_DEFAULT,
                      envs: dict[str, str] | None = None, language: str | None = None,
                      on_stdout: OnText | None = None,
                      on_stderr: OnText | None = None,
                      on_output: OnOutput | None = None) -> list[Execution]:
        """Run cells in order in one request, back to back, up to the first that does not end
        `ok`: one Execution per cell run (fewer than the cells when one failed). `timeout` and
        `envs` apply to each cell; callbacks get every cell's output as it comes."""
        streamed = Stream(on_stdout, on_stderr, on_output)
        return self._execute(list(cells), timeout, envs, streamed, language)

    def _execute(self, code: str | list[str], timeout: Timeout,
                 envs: dict[str, str] | None, stream: Stream,
                 language: str | None = None) -> list[Execution]:
        """POST an execute: one JSON reply, or its events when there are callbacks."""
        body = execute_body(code, timeout, envs, language)
        limit = http_timeout(self.http.timeout, timeout, 1 if isinstance(code, str) else len(code))
        try:
            if not stream.listens:
                response = self.http.post(f"{self._base}/execute", json=encode(body), timeout=limit)
                raise_for(response)
                return executions_of(response.json())
            return self._stream(body, limit, stream)
        except httpx.TimeoutException as error:
            raise gave_up(error) from error

    def _stream(self, body: Execute, limit: httpx.Timeout, stream: Stream
                ) -> list[Execution]:
        """Run a streaming execute, calling back as its events come."""
        with self.http.stream("POST", f"{self._base}/execute", json=encode(body), timeout=limit,
                              headers={"Accept": "text/event-stream"}) as response:
            raise_for(response)
            for event, data in events(response.iter_lines()):
                stream.take(event, data)
        return stream.executions()

    def ask(self, prompt: str, *, approve: str | None = None,
            on_approval: OnApproval | None = None, **options: Any
            ) -> Iterator[tuple[str, EventData]]:
        """Ask the model (the %%ask loop); yield its events, ending with ("ask_end", result).

        ("result", result), the same data, follows: a deprecated alias kept for one release.
        `approve` ("never", "first", "plan", "each"; omitted: the server's) makes steps wait
        for approval (the server's c.JupyterCI.approval_minimum may make it stricter). Each
        question comes as a ("waiting_for_user", event) with an `approval_id`:
        `on_approval(event)` answers it (returning "run", "skip", "stop", {"decision":
        "edit", "code": ...}, or None to leave it to `approve()` from elsewhere); without
        it, answer it with `approve()` before reading on, else ApprovalRequired is raised
        and the ask stopped.
        """
        gate = Approving(on_approval)
        with self.http.stream("POST", f"{self._base}/ask",
                              json=ask_body(prompt, approve, options),
                              headers={"Accept": "text/event-stream"}) as response:
            raise_for(response)
            for event, data in events(response.iter_lines()):
                decision = gate.take(event, data)
                if decision is not None:
                    self.approve(str(data["approval_id"]), decision)
                yield event, data
                gate.answered |= self._answered
                gate.check()

    def approve(self, approval_id: str, decision: Any = "run", *, code: str | None = None,
                plan: str | None = None) -> ApprovalReplyJSON:
        """Answer a question by its approval_id: run, edit (`code` or `plan`), skip or stop."""
        body = answer_body(approval_id, decision, code, plan)
        response = self.http.post(f"{self._base}/approvals", json=encode(body))
        raise_for(response)
        self._answered.add(approval_id)
        return shape_of(read(ApprovalReply, response.json()))

    def approvals(self) -> list[WaitingForUserJSON]:
        """List the questions (waiting_for_user events) that wait in this session."""
        response = self.http.get(f"{self._base}/approvals")
        raise_for(response)
        return approvals_of(response.json())

    def refresh(self) -> SessionInfoJSON:
        """Read the session's info again (status, executions, cwd) and return it."""
        response = self.http.get(self._base)
        raise_for(response)
        self.info = info = info_of(response.json())
        return info

    def upload(self, path: str, data: bytes | str | os.PathLike[str]) -> FileEntryJSON:
        """Put a file into the session's directory; return its listing entry."""
        response = self.http.put(f"{self._base}/files/{path}", content=body_of(data))
        raise_for(response)
        return shape_of(read(FileEntry, response.json()))

    def download(self, path: str) -> bytes:
        """Return a file's bytes."""
        response = self.http.get(f"{self._base}/files/{path}")
        raise_for(response)
        return response.content

    def files(self) -> list[FileEntryJSON]:
        """List the session's files (path, size, mime)."""
        response = self.http.get(f"{self._base}/files")
        raise_for(response)
        return files_of(response.json())

    def remove(self, path: str) -> None:
        """Delete a file."""
        raise_for(self.http.delete(f"{self._base}/files/{path}"))

    def restart(self) -> None:
        """Restart the kernel: variables cleared, files kept."""
        response = self.http.post(f"{self._base}/restart")
        raise_for(response)
        self.info = info_of(response.json())

    def notebook(self) -> dict[str, Any]:
        """Return the session's history as an nbformat v4 notebook."""
        response = self.http.get(f"{self._base}/notebook")
        raise_for(response)
        return dict(response.json())

    def delete(self) -> None:
        """Shut the kernel down and remove the directory (an already deleted one is fine)."""
        response = self.http.delete(self._base)
        if response.status_code != 404:
            raise_for(response)

    def run_tool_call(self, call: Any, *, timeout: Timeout = SERVER_DEFAULT) -> Any:
        """Run a model's tool call; return its result in that provider's format."""
        provider, call_id, code = code_of(call)
        return tool_result(provider, call_id, self.execute(code, timeout=timeout))


class Client:
    """A jupyter-ci server: `Client(url, token)`; `client.session()` starts a session.

    Without `token`, $JUPYTER_TOKEN is used; a missing or wrong one raises TokenRejected.
    `timeout` is the HTTP timeout of every call (seconds); an execute given a longer run
    timeout waits that long. `client.session(id)` attaches to a session that exists (from
    another process too): an unknown, deleted or culled one raises SessionNotFound with the
    server's message saying which. Either kind, used in a with block, is deleted at its end.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 300.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = auth_headers(token)
        self.http = httpx.Client(base_url=url.rstrip("/") + "/", headers=headers,
                                 timeout=timeout, transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def session(self, session_id: str | None = None, **options: Any) -> Session:
        """Start a session ({"kernel_name"?, "cwd_name"?, "env"?}), or attach to one by id."""
        if session_id is not None:
            response = self.http.get(f"jupyter-ci/sessions/{quote(session_id, safe='')}")
        else:
            response = self.http.post("jupyter-ci/sessions", json=options)
        raise_for(response)
        return Session(self.http, info_of(response.json()))

    def sessions(self) -> list[SessionInfoJSON]:
        """List the server's sessions."""
        response = self.http.get("jupyter-ci/sessions")
        raise_for(response)
        return [info_of(s) for s in response.json()]

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()
