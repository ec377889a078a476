"""KernelExecutor: the server's executor over jupyter_client, against a real kernel."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager

from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.server.sessions.executor import KernelControl, KernelExecutor


@pytest.fixture
def kernel(jp_asyncio_loop: asyncio.AbstractEventLoop
           ) -> Iterator[tuple[AsyncKernelManager, Any]]:
    """A real IPython kernel and a started async client, on pytest-jupyter's loop."""
    km = AsyncKernelManager(kernel_name="python3")
    jp_asyncio_loop.run_until_complete(km.start_kernel())
    client = km.client()
    client.start_channels()
    jp_asyncio_loop.run_until_complete(client.wait_for_ready(timeout=60))
    try:
        yield km, client
    finally:
        client.stop_channels()
        jp_asyncio_loop.run_until_complete(km.shutdown_kernel(now=True))


def executor(km: AsyncKernelManager, client: Any,
             events: list[OutputEvent] | None = None) -> KernelExecutor:
    return KernelExecutor(client, KernelControl(km.interrupt_kernel, km.is_alive),
                          events.append if events is not None else None)


async def test_outputs_state_and_counts(kernel: tuple[AsyncKernelManager, Any]) -> None:
    km, client = kernel
    events: list[OutputEvent] = []
    run = executor(km, client, events).run
    result = await run(textwrap.dedent("""\
        import sys
        x = 40
        print("a"); sys.stdout.flush()
        print("b", file=sys.stderr); sys.stderr.flush()
        print("c")
        from IPython.display import display
        h = display("one", display_id=True)
        h.update("two")
        x + 2"""), 10)
    assert result.status == "ok" and result.error is None
    assert [(o["output_type"], o.get("name")) for o in result.outputs] == [
        ("stream", "stdout"), ("stream", "stderr"), ("stream", "stdout"),
        ("display_data", None), ("execute_result", None)]
    assert result.outputs[3]["data"]["text/plain"] == "'two'"
    assert result.outputs[4]["data"]["text/plain"] == "42"
    assert result.execution_count == 1 and result.outputs[4]["execution_count"] == 1
    assert "replace" in [e.kind for e in events]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x", outputs=[nbformat.from_dict(o) for o in result.outputs], execution_count=1)])
    nbformat.validate(nb)
    again = await run("print(x)", 10)
    assert again.outputs == [{"output_type": "stream", "name": "stdout", "text": "40\n"}]
    assert again.execution_count == 2


async def test_errors_are_ansi_free(kernel: tuple[AsyncKernelManager, Any]) -> None:
    km, client = kernel
    result = await executor(km, client).run("def f():\n    return 1/0\nf()", 10)
    assert result.status == "error" and result.error is not None
    assert result.error.ename == "ZeroDivisionError"
    assert not any("\x1b[" in line for line in result.error.traceback)
    assert result.outputs[-1]["output_type"] == "error"


async def test_a_timeout_interrupts_and_the_kernel_lives(
    kernel: tuple[AsyncKernelManager, Any]
) -> None:
    km, client = kernel
    run = executor(km, client).run
    await run("kept = 'state'", 10)
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await run("while True:\n    pass", 1.0)
    assert result.status == "timeout" and result.error is not None
    assert result.error.ename == "TimeoutError" and loop.time() - started < 8
    after = await run("print(kept)", 10)
    assert after.status == "ok" and after.outputs[0]["text"] == "state\n"


async def test_a_dead_kernel_is_not_a_timeout(kernel: tuple[AsyncKernelManager, Any]) -> None:
    km, client = kernel
    result = await executor(km, client).run("import os\nos._exit(1)", 30)
    assert result.status == "died" and result.error is not None
    assert result.error.ename == "KernelDied"
