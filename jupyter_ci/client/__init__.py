"""Python client of jupyter-ci's REST sessions (sync and async), with ready-made tool definitions.

    from jupyter_ci.client import Client

    with Client("http://localhost:8888", token="...") as client, client.session() as py:
        print(py.execute("x = 2 + 2\\nx").text)        # 4
        tools = [py.openai_tool()]                      # add to your own OpenAI loop
        messages += py.run_tool_call(tool_call)         # run the model's call, get its result

What turns replies into results (`Execution`, server-sent events, the tool formats) is
written once here; `Session` and `AsyncSession` only do the HTTP calls.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from jupyter_ci.client.formats import (
    CodeInterpreterError,
    Execution,
    OnOutput,
    OnText,
    Stream,
    TokenRejected,
    Tools,
    aevents,
    body_of,
    code_of,
    events,
    raise_for,
    tool_result,
)

__all__ = ["AsyncClient", "AsyncSession", "Client", "CodeInterpreterError", "Execution",
           "Session", "TokenRejected"]


def auth_headers(token: str | None) -> dict[str, str]:
    """Return the header carrying `token`, else $JUPYTER_TOKEN (where servers read theirs)."""
    token = token or os.environ.get("JUPYTER_TOKEN")
    return {"Authorization": f"token {token}"} if token else {}


class Session(Tools):
    """One session (a kernel and a directory of its own); a context manager that deletes it."""

    def __init__(self, http: httpx.Client, info: dict[str, Any]) -> None:
        self.http, self.info, self.id = http, info, str(info["id"])
        self._base = f"jupyter-ci/sessions/{self.id}"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def execute(self, code: str, *, timeout: float | None = None,
                on_stdout: OnText | None = None, on_stderr: OnText | None = None,
                on_output: OnOutput | None = None) -> Execution:
        """Run code; with callbacks, stdout and outputs arrive while it runs."""
        body = {"code": code, **({"timeout": timeout} if timeout else {})}
        if on_stdout is None and on_stderr is None and on_output is None:
            response = self.http.post(f"{self._base}/execute", json=body)
            raise_for(response)
            return Execution.from_json(response.json())
        stream = Stream(on_stdout, on_stderr, on_output)
        with self.http.stream("POST", f"{self._base}/execute", json=body,
                              headers={"Accept": "text/event-stream"}) as response:
            raise_for(response)
            for event, data in events(response.iter_lines()):
                stream.take(event, data)
        assert stream.result is not None, "the stream ended without a result"
        return stream.result

    def ask(self, prompt: str, **options: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        """Ask the model (the %%ask loop); yield its events, the last one ("result", {...})."""
        with self.http.stream("POST", f"{self._base}/ask", json={"prompt": prompt, **options},
                              headers={"Accept": "text/event-stream"}) as response:
            raise_for(response)
            yield from events(response.iter_lines())

    def upload(self, path: str, data: bytes | str | os.PathLike[str]) -> dict[str, Any]:
        """Put a file into the session's directory; return its listing entry."""
        response = self.http.put(f"{self._base}/files/{path}", content=body_of(data))
        raise_for(response)
        return dict(response.json())

    def download(self, path: str) -> bytes:
        """Return a file's bytes."""
        response = self.http.get(f"{self._base}/files/{path}")
        raise_for(response)
        return response.content

    def files(self) -> list[dict[str, Any]]:
        """List the session's files (path, size, mime)."""
        response = self.http.get(f"{self._base}/files")
        raise_for(response)
        return list(response.json())

    def remove(self, path: str) -> None:
        """Delete a file."""
        raise_for(self.http.delete(f"{self._base}/files/{path}"))

    def restart(self) -> None:
        """Restart the kernel: variables cleared, files kept."""
        raise_for(self.http.post(f"{self._base}/restart"))

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

    def run_tool_call(self, call: Any, *, timeout: float | None = None) -> Any:
        """Run a model's tool call; return its result in that provider's format."""
        provider, call_id, code = code_of(call)
        return tool_result(provider, call_id, self.execute(code, timeout=timeout))


class Client:
    """A jupyter-ci server: `Client(url, token)`; `client.session()` starts a session.

    Without `token`, $JUPYTER_TOKEN is used; a missing or wrong one raises TokenRejected.
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

    def session(self, **options: Any) -> Session:
        """Start a session ({"kernel_name"?, "cwd_name"?, "env"?}); use it in a with block."""
        response = self.http.post("jupyter-ci/sessions", json=options)
        raise_for(response)
        return Session(self.http, response.json())

    def sessions(self) -> list[dict[str, Any]]:
        """List the server's sessions."""
        response = self.http.get("jupyter-ci/sessions")
        raise_for(response)
        return list(response.json())

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()


class AsyncSession(Tools):
    """The async form of Session (same methods, awaited)."""

    def __init__(self, http: httpx.AsyncClient, info: dict[str, Any]) -> None:
        self.http, self.info, self.id = http, info, str(info["id"])
        self._base = f"jupyter-ci/sessions/{self.id}"

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.delete()

    async def execute(self, code: str, *, timeout: float | None = None,
                      on_stdout: OnText | None = None, on_stderr: OnText | None = None,
                      on_output: OnOutput | None = None) -> Execution:
        """Run code; with callbacks, stdout and outputs arrive while it runs."""
        body = {"code": code, **({"timeout": timeout} if timeout else {})}
        stream = Stream(on_stdout, on_stderr, on_output)
        async with self.http.stream("POST", f"{self._base}/execute", json=body,
                                    headers={"Accept": "text/event-stream"}) as response:
            if not response.is_success:
                await response.aread()
                raise_for(response)
            async for event, data in aevents(response.aiter_lines()):
                stream.take(event, data)
        assert stream.result is not None, "the stream ended without a result"
        return stream.result

    async def ask(self, prompt: str, **options: Any
                  ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Ask the model; yield its events as they come, the last one ("result", {...})."""
        async with self.http.stream("POST", f"{self._base}/ask",
                                    json={"prompt": prompt, **options}) as response:
            if not response.is_success:
                await response.aread()
                raise_for(response)
            async for item in aevents(response.aiter_lines()):
                yield item

    async def upload(self, path: str, data: bytes | str | os.PathLike[str]) -> dict[str, Any]:
        """Put a file into the session's directory."""
        response = await self.http.put(f"{self._base}/files/{path}", content=body_of(data))
        raise_for(response)
        return dict(response.json())

    async def download(self, path: str) -> bytes:
        """Return a file's bytes."""
        response = await self.http.get(f"{self._base}/files/{path}")
        raise_for(response)
        return response.content

    async def delete(self) -> None:
        """Shut the kernel down and remove the directory."""
        response = await self.http.delete(self._base)
        if response.status_code != 404:
            raise_for(response)

    async def run_tool_call(self, call: Any, *, timeout: float | None = None) -> Any:
        """Run a model's tool call; return its result in that provider's format."""
        provider, call_id, code = code_of(call)
        return tool_result(provider, call_id, await self.execute(code, timeout=timeout))


class AsyncClient:
    """The async form of Client."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 300.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        headers = auth_headers(token)
        self.http = httpx.AsyncClient(base_url=url.rstrip("/") + "/", headers=headers,
                                      timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def session(self, **options: Any) -> AsyncSession:
        """Start a session."""
        response = await self.http.post("jupyter-ci/sessions", json=options)
        raise_for(response)
        return AsyncSession(self.http, response.json())
