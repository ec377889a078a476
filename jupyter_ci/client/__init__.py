"""Python client of jupyter-ci's REST sessions (sync and async), with ready-made tool definitions.

    from jupyter_ci.client import Client

    with Client("http://localhost:8888", token="...") as client, client.session() as py:
        print(py.execute("x = 2 + 2\\nx").text)        # 4
        tools = [py.openai_tool()]                      # add to your own OpenAI loop
        messages += py.run_tool_call(tool_call)         # run the model's call, get its result
        for kind, data in py.ask("plot sales.csv", approve="each",
                                 on_approval=lambda event: "run"):   # or edit, skip, stop
            ...

What turns replies into results (`Execution`, server-sent events, the tool formats) is
written once (results.py, formats.py); `Session` (sync.py) and `AsyncSession` (aio.py) only
do the HTTP calls.
"""

from __future__ import annotations

from jupyter_ci.client.aio import AsyncClient, AsyncSession
from jupyter_ci.client.formats import (
    SERVER_DEFAULT,
    ApprovalRequired,
    ClientTimeout,
    CodeInterpreterError,
    SessionNotFound,
    TokenRejected,
)
from jupyter_ci.client.results import Execution, ExecutionError, Logs, Result
from jupyter_ci.client.sync import Client, Session

__all__ = ["SERVER_DEFAULT", "ApprovalRequired", "AsyncClient", "AsyncSession", "Client",
           "ClientTimeout", "CodeInterpreterError", "Execution", "ExecutionError", "Logs",
           "Result", "Session", "SessionNotFound", "TokenRejected"]
