"""A kernel provisioner slow to launch: stands in for boxes, containers and remote kernels.

tests/test_server_shutdown.py registers it (an entry point of a stub distribution on
PYTHONPATH) so that a server's kernel start is still in flight when the server is stopped.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from jupyter_client.provisioning import LocalProvisioner

#: Seconds every launch waits before starting the kernel.
DELAY_VAR = "SLOW_PROVISIONER_S"


class SlowProvisioner(LocalProvisioner):  # type: ignore[misc]
    """LocalProvisioner, after a pause."""

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        await asyncio.sleep(float(os.environ.get(DELAY_VAR, "2")))
        return dict(await super().pre_launch(**kwargs))
