"""The Jupyter Server extension: the panel's routes, the model service, REST sessions."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from jupyter_server._tz import utcnow
from jupyter_server.extension.application import ExtensionApp
from jupyter_server.serverapp import ServerApp
from tornado.ioloop import PeriodicCallback

from jupyter_ci.agent.cost import price_table
from jupyter_ci.config import ServerSettings
from jupyter_ci.mcp.http import MCPDoor
from jupyter_ci.models.broker import ENV_APPROVAL, ENV_PRICES
from jupyter_ci.server.broker.broker import BROKER_ROUTE, Broker, broker_url
from jupyter_ci.server.broker.hub_link import (
    HUB_TOKENS,
    UNREAD,
    Applied,
    HubLink,
    HubLinkError,
    HubUpstream,
    apply_policy,
    hub_client,
    start_with_policy,
)
from jupyter_ci.server.broker.kernels import Told, hook_kernel_manager
from jupyter_ci.server.broker.keys import key_file_to_read, stored_keys
from jupyter_ci.server.broker.model_service import ModelService
from jupyter_ci.server.broker.service_handlers import service_routes
from jupyter_ci.server.broker.unix_socket import BrokerSockets
from jupyter_ci.server.broker.upstream import make_client
from jupyter_ci.server.gateway import is_gateway
from jupyter_ci.server.handlers import routes
from jupyter_ci.server.hardening import make_non_dumpable
from jupyter_ci.server.kernel_models import fill_starting_kernels
from jupyter_ci.server.nodelay import KernelWebsockets, install_low_latency
from jupyter_ci.server.sandbox import box
from jupyter_ci.server.sandbox.choices import Choices
from jupyter_ci.server.sandbox.choices import default_file as choices_file
from jupyter_ci.server.sandbox.environ import ENV_BROKER_SOCKET, ENV_HIDE, ENV_ROOT
from jupyter_ci.server.sandbox.notebooks import NotebookBoxes
from jupyter_ci.server.sessions.manager import SessionManager
from jupyter_ci.server.sessions.notebook_clients import close_notebook_clients
from jupyter_ci.server.sessions.ports import ModelPort
from jupyter_ci.wire.box import NotebookSandbox
from jupyter_ci.wire.hub import UserPolicy

#: Seconds between checks of whether a turn or a session runs (activity, for culling).
ACTIVITY_EVERY_S = 5.0
#: Seconds between counts of idle boxed sessions' folders against their disk caps.
DISK_EVERY_S = 1.0
#: Seconds between readings of the user's policy under the Hub's service.
POLICY_EVERY_S = 300.0
#: The kernelspecs the package carries ("Python 3 (sandboxed)").
KERNELS = Path(__file__).parent / "sandbox" / "kernels"


class JupyterCIApp(ExtensionApp):
    """Serve /jupyter-ci/config and keep provider keys out of kernels."""

    name = "jupyter_ci"
    #: The least notebook_sandbox the JupyterHub's policy allows (its policy sets it).
    notebook_floor: NotebookSandbox = "never"

    def initialize_settings(self) -> None:
        """Take the keys out of the environment before any kernel can inherit them."""
        self.ci = ServerSettings(parent=self)
        if self.ci.harden_process:
            make_non_dumpable(self.log)
        self._take_keys()
        self._budgets()
        self._hook_kernels()
        # Kernel websockets without Nagle's 40 ms per execute (server/nodelay.py).
        install_low_latency(self.settings, KernelWebsockets(parent=self).low_latency)
        self.client = make_client(self.ci.request_timeout)
        self.service = ModelService(self.broker, self.ci.request_timeout, self.ci.retries,
                                    self.ci.max_reply_tokens, self.log, self.ci.model,
                                    price_table(self.ci.prices), upstream=self.hub)
        self._publish_environ()
        # The port is final only once init_httpserver has run (after extensions load,
        # and it resolves --port=0 and port retries); the loop's first callback runs
        # after that and before the server can accept a request that starts a kernel.
        self._server().io_loop.add_callback(self._publish_environ)
        # Sessions reach the model service only through their port (sessions/ports.py);
        # typed here so that mypy checks the service fits it.
        models: ModelPort = self.service
        self.sessions = SessionManager(self._server().kernel_manager,
                                       Path(self._server().root_dir), self.ci, self.log, models)
        self._publish_sandbox()
        self.mcp = MCPDoor(self._server(), self.log)  # its SDK loads at the first request
        self._server().io_loop.add_callback(self._start_sessions)
        self._server().io_loop.add_callback(self._start_warming)
        # Once every extension has read it (JupyterHub's own among them).
        self._server().io_loop.add_callback(self._withhold_hub_token)
        self._share_settings()

    def _share_settings(self) -> None:
        """Give the handlers the services, and say which keys the model service holds."""
        self.settings.update({"jupyter_ci": self.ci, "jupyter_ci_broker": self.broker,
                              "jupyter_ci_service": self.service,
                              "jupyter_ci_sessions": self.sessions,
                              "jupyter_ci_told": self.told,
                              # The notebook door marks the kernels agents run code in.
                              "jupyter_ci_mark_model_code": self.broker.model_code.mark})
        names = ", ".join(p.name for p in self.broker.configured()) or "none"
        self.log.info("jupyter-ci: provider keys held by the server's model service (%s)",
                      names)
        for problem in self.broker.misconfigured():
            self.log.warning("jupyter-ci: %s", problem)

    def _take_keys(self) -> None:
        """Hold the provider keys (environment, key file, keyring), or join the Hub's service."""
        key_file = key_file_to_read(self.ci.key_file)
        stored = stored_keys(key_file, os.environ, self.log)
        self.broker = Broker.take_from_environ(os.environ, stored, key_file)
        self.hub = self._join_hub()

    def _join_hub(self) -> HubUpstream | None:
        """Under the Hub's jupyter-ci service: hold no key, take the user's policy."""
        link = HubLink.find(self.ci.hub_url, os.environ)
        if link is None:
            return None
        dropped = [p.name for p in self.broker.configured()]
        if dropped:
            self.log.warning("jupyter-ci: ignoring the %s key(s) of this server: under "
                             "JupyterHub the jupyter-ci service holds the keys", ", ".join(dropped))
        self.own = Applied(self.ci.approval_minimum, self.ci.session_sandbox)
        try:
            policy = link.read_policy()
        except HubLinkError as err:
            self.log.error("jupyter-ci: %s; until it answers, every ask waits for approval of "
                           "each step and every REST session must be boxed", err)
            policy = UNREAD
        self.broker = start_with_policy(self.ci, policy)
        self._policy(policy)
        self._policy_reader = PeriodicCallback(self._read_policy, POLICY_EVERY_S * 1000)
        self._server().io_loop.add_callback(self._policy_reader.start)
        return HubUpstream(link, hub_client(link, self.ci.request_timeout, self.ci.retries))

    def _policy(self, policy: UserPolicy) -> None:
        """Apply the user's policy (approval floor, boxing) to this server's settings."""
        for change in apply_policy(self.ci, policy, self.own):
            self.log.info("jupyter-ci: the JupyterHub's policy sets %s", change)
        floor: NotebookSandbox = "always" if policy.boxed else "never"
        if floor != self.notebook_floor:
            self.notebook_floor = floor
            self.log.info("jupyter-ci: the JupyterHub's policy sets notebook kernels %s",
                          "boxed, always" if policy.boxed else "as this server's settings say")

    async def _read_policy(self) -> None:
        """Read the user's policy again (an admin may have changed it, or it was unread)."""
        assert self.hub is not None
        try:
            policy = await asyncio.to_thread(self.hub.link.read_policy)
        except HubLinkError as err:
            self.log.warning("jupyter-ci: %s", err)
            return
        # The providers the Hub serves now (none were known if the start could not read them).
        self.broker.providers.clear()
        self.broker.providers.update(start_with_policy(self.ci, policy).providers)
        self._policy(policy)
        self._publish_environ()

    def _hook_kernels(self) -> None:
        """Hook the server's kernel manager, whichever door starts a kernel."""
        kernels = self._server().kernel_manager
        # Each kernel gets its own token in the env of its start (see server/broker/kernels.py),
        # with what the server tells its kernels (self.told), never put in os.environ.
        # Under any JupyterHub: with it, code in a kernel could act as the user at the Hub.
        under_hub = self.hub is not None or any(os.environ.get(n) for n in HUB_TOKENS)
        self.told = Told(withheld=HUB_TOKENS if under_hub else frozenset())
        hook_kernel_manager(kernels, self.broker, self.told, self.log)
        # Outside the broker's hook: its start reads the kernelspec this one boxes.
        self.boxes = NotebookBoxes(kernels, self.ci, self._server().root_dir,
                                   Choices(choices_file()), self.log, self._notebook_floor)
        if not is_gateway(kernels):
            self.boxes.hook()
            # The file ids jupyter_server_fileid keeps, once every extension has loaded.
            self._server().io_loop.add_callback(self._file_ids)
        # No 500 from /api/kernels for a kernel being started (server/kernel_models.py).
        fill_starting_kernels(kernels)

    def _withhold_hub_token(self) -> None:
        """Take the server's Hub token out of os.environ: no terminal or child inherits it."""
        if not any(os.environ.get(name) for name in HUB_TOKENS):
            return
        # JupyterHub's identity provider and its extension (which reports activity to the
        # Hub) each read it from os.environ when first asked: ask them now.
        server = self._server()
        apps = server.extension_manager.extension_apps.values()
        for owner in (server.identity_provider, server, *(app for got in apps for app in got)):
            hub_auth = getattr(owner, "hub_auth", None)
            if hub_auth is not None and not getattr(hub_auth, "api_token", ""):
                self.log.warning("jupyter-ci: JupyterHub's token is not read yet; it stays "
                                 "in the server's environment")
                return
        for name in HUB_TOKENS:
            os.environ.pop(name, None)
        self.log.info("jupyter-ci: the server's JupyterHub token is kept from terminals, "
                      "kernels and every other process it starts")

    def _file_ids(self) -> None:
        """Know notebooks by their file id too, where the server keeps them."""
        self.boxes.choices.file_ids = self._server().web_app.settings.get("file_id_manager")

    def _notebook_floor(self) -> NotebookSandbox:
        """Return the least notebook_sandbox the JupyterHub's policy allows (else 'never')."""
        return self.notebook_floor

    def _budgets(self) -> None:
        """Give the broker the budgets of kernels and the server, in tokens and in USD."""
        tokens, money, ci = self.broker.budget.tokens, self.broker.budget.money, self.ci
        tokens.per_kernel, tokens.per_server = ci.max_tokens_per_kernel, ci.max_tokens_per_server
        money.per_kernel, money.per_server = ci.max_cost_per_kernel, ci.max_cost_per_server

    def initialize_handlers(self) -> None:
        """Register the routes (see handlers.routes)."""
        self.handlers.extend(routes(self.ci, self.service, self.client, self.log, self.sessions,
                                    self._keys_changed, self.mcp, self.boxes))

    def _start_sessions(self) -> None:
        """Cull idle sessions once the server runs (the pool fills at the first session)."""
        # A turn streaming or a session running is activity (what jupyterhub-singleuser
        # reports to the Hub's idle culler, and shutdown_no_activity_timeout reads), even
        # while the kernels say nothing: a long model call, a quiet step.
        self._activity = PeriodicCallback(self._mark_activity, ACTIVITY_EVERY_S * 1000)
        self._activity.start()
        if self.ci.sandbox_disk_bytes or self.ci.sandbox_disk_files:
            # Between runs too: a process a run left behind may write on (sessions/disk.py).
            self._disks = PeriodicCallback(self.sessions.check_disks, DISK_EVERY_S * 1000)
            self._disks.start()
        idle = self.ci.session_idle_timeout
        if idle > 0:
            # Check often enough that a session outlives its timeout by a quarter at most.
            self._culler = PeriodicCallback(self.sessions.cull, min(60.0, idle / 4) * 1000)
            self._culler.start()

    def _mark_activity(self) -> None:
        """Say the server is active now if a turn streams or a session runs."""
        if self.service.in_flight or self.sessions.in_use():
            self._server().web_app.settings["jupyter_ci_last_activity"] = utcnow()

    def _start_warming(self) -> None:
        """Load the SDKs in a worker thread while the server starts, not in the first ask."""
        self._warming = asyncio.ensure_future(self.service.warm())
        # And what the first box would wait for (its checks of bubblewrap and of /etc).
        self._warming_box = asyncio.ensure_future(asyncio.to_thread(box.warm))

    def _publish_sandbox(self) -> None:
        """Offer the sandboxed kernelspec; tell its provisioners what to bind and hide."""
        # Installed as data too, but a prefix or user site may not hold it: the package does.
        specs = getattr(self._server().kernel_spec_manager, "kernel_dirs", None)
        if isinstance(specs, list) and str(KERNELS) not in specs:
            specs.append(str(KERNELS))
        # Boxes have no network: each reaches the broker through a socket of its own, made
        # by the provisioner (server/broker/unix_socket.py); this one is for other processes'.
        self.broker_socket = BrokerSockets(service_routes(self.ci, self.service, self.log),
                                           self.ci.sandbox_broker_connections, self.log,
                                           self._server().io_loop)
        self.told.boxes[ENV_BROKER_SOCKET] = str(self.broker_socket.start())
        # What no box may show even when a mount above it would: the sessions, the key
        # file. The server's root is a notebook box's to write, and hidden from sessions'.
        hidden = [str(self.sessions.root)]
        if self.ci.key_file:
            hidden.append(str(Path(self.ci.key_file).expanduser()))
        self.told.boxes[ENV_HIDE] = os.pathsep.join(hidden)
        self.told.boxes[ENV_ROOT] = self._server().root_dir

    async def stop_extension(self) -> None:
        """Shut the sessions down and close the upstream connection pool."""
        # Whatever loading made: Jupyter stops an extension whose loading failed part way
        # (a bad setting) too, and a stop that raised kept the server from exiting.
        def part(name: str) -> Any:
            return getattr(self, name, None)

        for stopping in (part("_culler"), part("broker_socket"), part("_policy_reader"),
                         part("_activity"), part("_disks")):
            if stopping is not None:
                stopping.stop()
        warming = part("_warming")
        if warming is not None:
            warming.cancel()
        if part("mcp") is not None:
            await self.mcp.stop()  # before the sessions: its tools may be calling them
        if part("sessions") is not None:
            await self.sessions.close()
        close_notebook_clients(self._server().kernel_manager)  # run_in_notebook's
        if part("client") is not None:
            await self.client.aclose()
        hub = part("hub")
        if hub is not None:
            hub.client.close()

    def _keys_changed(self) -> None:
        """A key was pasted in the panel: tell new kernels, drop adapters of replaced keys."""
        self.service.forget()
        self._publish_environ()

    def _publish_environ(self) -> None:
        """Tell kernels started from now on the broker's URL, providers, model and prices."""
        server = self._server()
        url = None
        if self.ci.broker_url:
            url = self.ci.broker_url.rstrip("/")
        elif server.sock:
            # A Unix socket has no port: kernels connect through it (ENV_SOCKET).
            url = f"http://localhost{server.base_url.rstrip('/')}/{BROKER_ROUTE}"
        elif server.port:  # 0 until init_httpserver picks the port (--port=0)
            scheme = "https" if server.certfile else "http"
            url = broker_url(scheme, server.ip, server.port, server.base_url)
        # The model set in the server's config becomes the kernels' default too.
        socket = "" if self.ci.broker_url else server.sock
        told = self.broker.kernel_environ(url, socket, self.ci.model)
        # An admin's least approval reaches every kernel started from now on.
        if self.ci.approval_minimum != "never":
            told[ENV_APPROVAL] = self.ci.approval_minimum
        # Its price table too, so a notebook's cost line matches the server's budgets.
        if self.ci.prices:
            told[ENV_PRICES] = json.dumps(self.ci.prices)
        self.told.kernels = told

    def _server(self) -> ServerApp:
        """Return the server this extension was loaded into."""
        assert self.serverapp is not None, "initialize runs only after linking to a server"
        return self.serverapp
