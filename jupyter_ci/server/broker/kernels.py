"""Give each kernel the server starts its own broker token, and take it back when it ends.

Hooked on the server's kernel manager instance (jupyter_server's MappingKernelManager),
on the calls every kernel goes through, whichever door started it (`POST /api/kernels`,
a notebook session, code calling the kernel manager). Wrapping this one instance needs no
configuration and leaves `kernel_manager_class` and provisioners to the user:

- `start_kernel`: the token is issued for a kernel id picked here, and passed in the
  `env` of the start with what the server tells its kernels (`Told`: the model service's
  URL, providers, model, least approval, prices; for a sandboxed kernelspec, the broker's
  socket and the paths its box hides, which its provisioner reads and keeps out of the box).
  Nothing of it is in the server's `os.environ`, which terminals and every other child
  inherit; the launch uses that env instead, and the kernel's own manager keeps it for
  restarts. A REST session's kernel (its start's env says so:
  `ENV_SESSION`, set by the sessions after the client's own variables) gets no token and
  none of the model service's variables: its asks run in the server, and code sent through
  `execute` must not make model calls on the operator's key. The mark can only take a
  credential away, so whoever can set it gains nothing.
- the kernel's own `restart_kernel` (the REST restart and the auto-restarter both call
  it): a new token replaces the old one in the kept env (`update_env`) before the relaunch.
- `shutdown_kernel` and `remove_kernel` (the end of every shutdown, and of a kernel that
  died for good): the token is revoked.

A gateway (`--gateway-url`) starts kernels elsewhere and picks their ids itself: the token
is issued under a provisional id, travels in the start request with what the server tells
its kernels (the gateway client sends only `KERNEL_*` variables and
`GatewayClient.allowed_envs`, so our variables are added to that list) and is moved to the
kernel's id once the gateway answers. The gateway restarts its kernels with the env they
started with, so a restarted gateway kernel keeps its token.
The gateway itself must let them through (Kernel Gateway: `env_whitelist`; Enterprise
Gateway: `client_envs`; see the README's scale-out section).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from logging import Logger
from typing import Any

from jupyter_ci.models.broker import (
    ENV_APPROVAL,
    ENV_MODEL,
    ENV_PRICES,
    ENV_PROVIDERS,
    ENV_TOKEN,
    ENV_URL,
    MANAGED,
)
from jupyter_ci.server.broker.broker import Broker
from jupyter_ci.server.gateway import is_gateway
from jupyter_ci.server.sandbox.environ import (
    ENV_BROKER_SOCKET,
    ENV_HIDE,
    ENV_HOSTS,
    ENV_PASS,
    ENV_ROOT,
    ENV_SESSION,
    PROVISIONER,
    PUBLISHED,
)

_HOOKED = "_jupyter_ci_broker_hooks"
#: What a gateway kernel needs to reach the broker, and what a gateway's sandbox provisioner
#: needs (the broker's socket and the paths to hide: of use when it shares this machine).
GATEWAY_ENVS = (ENV_URL, ENV_TOKEN, ENV_PROVIDERS, ENV_MODEL, ENV_APPROVAL, ENV_PRICES,
                ENV_BROKER_SOCKET, ENV_HIDE, ENV_ROOT, ENV_HOSTS, ENV_SESSION, ENV_PASS)
#: What a REST session's kernel goes without: every way to the model service.
SESSION_WITHOUT = frozenset({*MANAGED, ENV_BROKER_SOCKET})
#: What only the server sets in a kernel's start: a value inherited from a parent server
#: (its own os.environ) would point at another broker.
SERVER_SET = frozenset({*MANAGED, *PUBLISHED})


@dataclass
class Told:
    """What the server tells the kernels it starts, read at each start (never os.environ)."""

    #: Every kernel's: the model service's URL and socket, providers, model, approval, prices.
    kernels: dict[str, str] = field(default_factory=dict)
    #: A sandboxed kernel's provisioner's: the broker's socket, the paths its box hides.
    boxes: dict[str, str] = field(default_factory=dict)
    #: What no kernel inherits of the server's environment (under the Hub's service, the
    #: server's Hub token: server/broker/hub_link.py).
    withheld: frozenset[str] = frozenset()

    def local(self, env: Mapping[str, str], session: bool, boxed: bool) -> dict[str, str]:
        """Return the env of a kernel started here: `env` with what the server tells it."""
        start = {k: v for k, v in env.items() if k not in SERVER_SET and k not in self.withheld}
        if not session:
            start.update(self.kernels)
        if boxed:
            # Its provisioner reads them and keeps them out of the box (environ.INTERNAL).
            start.update({k: v for k, v in self.boxes.items()
                          if not (session and k in SESSION_WITHOUT)})
        return start

    def gateway(self, env: Mapping[str, str], session: bool) -> dict[str, str]:
        """Return the env of a gateway kernel's start request (its client adds os.environ)."""
        # Blank what the client would add from a parent server's os.environ.
        start = {**dict.fromkeys((k for k in SERVER_SET if k in os.environ), ""),
                 **{k: v for k, v in env.items() if k not in self.withheld}}
        start.update(self.boxes)
        if session:
            start.update(dict.fromkeys(SESSION_WITHOUT, ""))
        else:
            start.update(self.kernels)
        return start


def is_session(env: Mapping[str, str] | None) -> bool:
    """Tell the start of a REST session's kernel, which holds no model credential."""
    return env is not None and env.get(ENV_SESSION) == "1"


def hook_kernel_manager(manager: Any, broker: Broker, told: Told, log: Logger) -> bool:
    """Issue and revoke tokens around `manager`'s kernels, tell them `told`; False if not."""
    if getattr(manager, _HOOKED, False):
        return True
    needed: tuple[str, ...] = ("start_kernel", "shutdown_kernel", "remove_kernel")
    gateway = is_gateway(manager)
    if not gateway:
        needed += ("new_kernel_id",)
    if not all(callable(getattr(manager, name, None)) for name in needed):
        log.info("jupyter-ci: kernels of %s get no broker token (an unknown kernel manager); "
                 "they cannot reach the broker", type(manager).__name__)
        return False
    if gateway:
        _allow_gateway_envs(log)
        _wrap_gateway_start(manager, broker, told)
    else:
        _wrap_start(manager, broker, told)
    _wrap_end(manager, broker)
    setattr(manager, _HOOKED, True)
    return True


def boxed(manager: Any, kernel_name: str | None) -> bool:
    """Tell a kernelspec whose kernels the sandbox provisioner starts."""
    try:
        spec = manager.kernel_spec_manager.get_kernel_spec(
            kernel_name or manager.default_kernel_name)
        provisioner = spec.metadata.get("kernel_provisioner") or {}
    except Exception:  # no such kernel: its start fails and says so
        return False
    return isinstance(provisioner, dict) and provisioner.get("provisioner_name") == PROVISIONER


def _wrap_start(manager: Any, broker: Broker, told: Told) -> None:
    """Start each new kernel with its own token in its environment."""
    start = manager.start_kernel

    async def start_kernel(*, kernel_id: str | None = None, **kwargs: Any) -> str:
        if kernel_id is not None and kernel_id in manager:
            return str(await start(kernel_id=kernel_id, **kwargs))  # an existing kernel
        kernel_id = kernel_id or str(manager.new_kernel_id())
        env = kwargs.get("env")
        session = is_session(env)
        # No env means os.environ to the launcher; ours keeps everything else in it.
        kwargs["env"] = told.local(os.environ if env is None else env, session,
                                   boxed(manager, kwargs.get("kernel_name")))
        if session:
            # Everything it runs is a client's or a model's: its outputs never run script.
            broker.model_code.mark(kernel_id)
            try:
                return str(await start(kernel_id=kernel_id, **kwargs))
            except BaseException:
                broker.model_code.forget(kernel_id)
                raise
        kwargs["env"][ENV_TOKEN] = broker.issue(kernel_id)
        try:
            started = str(await start(kernel_id=kernel_id, **kwargs))
        except BaseException:
            broker.revoke(kernel_id)
            raise
        _wrap_restart(manager.get_kernel(started), started, broker)
        return started

    manager.start_kernel = start_kernel


def _allow_gateway_envs(log: Logger) -> None:
    """Add the broker's variables to those the gateway client sends with a kernel start."""
    from jupyter_server.gateway.gateway_client import GatewayClient

    client = GatewayClient.instance()
    allowed = [name for name in client.allowed_envs.split(",") if name]
    missing = [name for name in GATEWAY_ENVS if name not in allowed]
    if missing:
        client.allowed_envs = ",".join(allowed + missing)
        log.info("jupyter-ci: GatewayClient.allowed_envs += %s (the gateway must let them "
                 "through too)", ",".join(missing))


def _wrap_gateway_start(manager: Any, broker: Broker, told: Told) -> None:
    """Send a token with each kernel start to the gateway; bind it to the id it returns."""
    start = manager.start_kernel

    async def start_kernel(*, kernel_id: str | None = None, **kwargs: Any) -> str:
        if kernel_id is not None:  # a kernel the gateway runs already
            return str(await start(kernel_id=kernel_id, **kwargs))
        env = kwargs.get("env") or {}
        if is_session(env):
            kwargs["env"] = told.gateway(env, session=True)
            started = str(await start(**kwargs))
            broker.model_code.mark(started)  # its outputs never run script (model_code.py)
            return started
        provisional = f"starting:{uuid.uuid4().hex}"
        kwargs["env"] = {**told.gateway(env, session=False), ENV_TOKEN: broker.issue(provisional)}
        try:
            started = str(await start(**kwargs))
        except BaseException:
            broker.revoke(provisional)
            raise
        broker.rebind(provisional, started)
        return started

    manager.start_kernel = start_kernel


def _wrap_restart(kernel: Any, kernel_id: str, broker: Broker) -> None:
    """Give the kernel a new token each time its manager relaunches it."""
    restart = kernel.restart_kernel

    async def restart_kernel(*args: Any, **kwargs: Any) -> Any:
        # update_env (jupyter_client 8.5+) edits the env kept for relaunches; without it
        # the relaunched kernel holds a revoked token: refused, never reused.
        update_env: Callable[..., None] | None = getattr(kernel, "update_env", None)
        token = broker.issue(kernel_id)
        if update_env is not None:
            update_env(env={ENV_TOKEN: token})
        result = restart(*args, **kwargs)
        return await result if isinstance(result, Awaitable) else result

    kernel.restart_kernel = restart_kernel


def _wrap_end(manager: Any, broker: Broker) -> None:
    """Revoke a kernel's token when it is shut down, or removed after dying."""
    shutdown, remove = manager.shutdown_kernel, manager.remove_kernel

    async def shutdown_kernel(kernel_id: str, *args: Any, **kwargs: Any) -> Any:
        broker.revoke(kernel_id)
        result = shutdown(kernel_id, *args, **kwargs)
        return await result if isinstance(result, Awaitable) else result

    def remove_kernel(kernel_id: str) -> Any:
        broker.revoke(kernel_id)
        return remove(kernel_id)

    manager.shutdown_kernel = shutdown_kernel
    manager.remove_kernel = remove_kernel
