"""`MappingKernelManager.list_kernels()` raises TraitError for a kernel being started.

Needs jupyter_server and ipykernel.

    python kernel_model_race_repro.py

Starts one kernel with jupyter_server's `AsyncMappingKernelManager` while another task
reads `list_kernels()` (what `GET /api/kernels` and `/api/status` do) at every turn of the
event loop, and prints what the reader saw; then the same with the proposed fix (the
activity fields set in `pre_start_kernel`, before the kernel is registered).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from typing import Any

from jupyter_server._tz import utcnow
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager


class Fixed(AsyncMappingKernelManager):
    """The proposed fix: a kernel's activity fields exist before it is registered."""

    def pre_start_kernel(self, kernel_name: str | None, kwargs: Any) -> Any:
        km, kernel_name, kernel_id = super().pre_start_kernel(kernel_name, kwargs)
        km.execution_state, km.reason, km.last_activity = "starting", "", utcnow()
        return km, kernel_name, kernel_id


async def trial(cls: type[AsyncMappingKernelManager]) -> str:
    """Start a kernel while reading the kernel list; say what the reader saw."""
    with tempfile.TemporaryDirectory() as root:
        manager = cls(root_dir=root)
        errors: list[str] = []
        reads = 0
        starting = asyncio.ensure_future(manager.start_kernel(kernel_name="python3"))
        while not starting.done():
            try:
                manager.list_kernels()
                reads += 1
            except Exception as error:  # the bug: a TraitError, not HTTPError or KeyError
                errors.append(f"{type(error).__name__}: {str(error)[:90]}")
            await asyncio.sleep(0)
        kernel_id = await starting
        await manager.shutdown_kernel(kernel_id, now=True)
        seen = errors[0] if errors else "no error"
        return f"{cls.__name__:26} {reads} reads ok, {len(errors)} failed: {seen}"


async def main() -> None:
    for cls in (AsyncMappingKernelManager, Fixed):
        print(await trial(cls))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
