"""The kernel provisioner that runs a kernel in a bubblewrap box (`jupyter-ci-sandbox`).

jupyter_client picks it for any kernelspec whose metadata names it
(`{"kernel_provisioner": {"provisioner_name": "jupyter-ci-sandbox"}}`), whoever starts the
kernel: Jupyter Server, a REST session, Kernel Gateway, nbclient. It is jupyter_client's own
local provisioner with three changes: ZMQ over ipc sockets in a private folder (the box has
no network to carry tcp), the launch command wrapped in the box (box.py), and an interrupt
sent to the kernel itself (a signal to bubblewrap's process group would end the box).

Its settings are `c.JupyterCI.sandbox_*` (config_sessions.SandboxSettings, nothing else),
read through the kernel manager's config.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from traitlets import Bool

from jupyter_ci.config_sessions import SandboxSettings
from jupyter_ci.models.broker import ENV_SOCKET, ENV_URL
from jupyter_ci.server.sandbox import cgroup, sockets, watch
from jupyter_ci.server.sandbox.box import SOCKET_DIR, Box, Limits, command, problem, python_paths
from jupyter_ci.server.sandbox.egress import INSIDE, Egress, close_kernel, egress, kernel_egress
from jupyter_ci.server.sandbox.environ import (
    ENV_BOXED,
    ENV_BROKER_SOCKET,
    ENV_HOSTS,
    ENV_ROOT,
    ENV_SESSION,
    PROVISIONER,
    box_environ,
    hidden_paths,
    published,
    record_secret,
)
from jupyter_ci.server.sandbox.guards import guards
from jupyter_ci.server.sandbox.notebook_box import NotebookBox, index_hosts, notebook_box

#: The entry point name a kernelspec's metadata uses.
NAME = PROVISIONER


#: What a notebook box's refusal says allows the host (`{host}`: the entry that would).
NOTEBOOK_HINT = ("in JupyterLab, choose 'Allow {host} for this notebook' (offered once the "
                 "cell has run), or list it in c.JupyterCI.notebook_network for every "
                 "notebook; then run the cell again.")


def notebook_entries(ci: SandboxSettings, env: dict[str, str]) -> list[str]:
    """Return what a notebook's box may reach: the package index, the settings', the user's."""
    entries = index_hosts(env) if ci.notebook_package_index else []
    entries += list(ci.notebook_network)
    # A list for every sandboxed kernel counts for notebooks' too (as before they had theirs).
    entries += list(ci.sandbox_network) if isinstance(ci.sandbox_network, list) else []
    entries += [host for host in env.get(ENV_HOSTS, "").split(",") if host]
    return list(dict.fromkeys(entries))


class SandboxUnavailable(RuntimeError):
    """This machine cannot box a kernel; the message says what is missing."""


class SandboxProvisioner(LocalProvisioner):
    """Start the kernel in a bubblewrap box: its folder, no network, limits."""

    zmq_over_tcp = Bool(
        False, help="The kernel speaks ZMQ over TCP only (Deno's): a forwarder in the box "
        "(zmq_forward.py) takes the host's ipc connections to its TCP ports on the box's own "
        "loopback. Set in the kernelspec's metadata: kernel_provisioner.config.",
    ).tag(config=True)

    _kernel_pid: int | None = None
    _cgroup: cgroup.Cgroup | None = None
    _watched = 0
    _python: Path | None = None

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        """Put the kernel's ZMQ sockets in a private folder and wrap its command in the box."""
        why = problem()
        if why is not None:
            raise SandboxUnavailable(f"Cannot start a sandboxed kernel: {why}.")
        km = self.parent
        if km is None:
            raise SandboxUnavailable("A sandboxed kernel is started by a kernel manager.")
        private = private_folder(str(km.kernel_id or self.kernel_id))
        # ipc: the box has no network; the sockets live where both sides see them.
        km.transport, km.cache_ports = "ipc", False
        km.ip = str(private / "zmq")
        km.connection_file = str(private / "kernel.json")
        kwargs = await super().pre_launch(**kwargs)
        env = dict(kwargs.get("env") or os.environ)
        cwd = Path(os.path.realpath(kwargs.get("cwd") or os.getcwd()))
        # A gateway's client names the session's folder so: Kernel Gateway starts kernels in
        # its own, and the kernel's chdir would find nothing there in the box.
        asked = env.get("KERNEL_WORKING_DIR", "")
        if asked and os.path.isdir(asked):
            cwd = Path(os.path.realpath(asked))
        ci = SandboxSettings(parent=self)
        box, inner_env, forwarder = self._box(ci, env, cwd, private, kwargs["cmd"][0])
        kernel_cmd = list(kwargs["cmd"])
        if self._python is not None:  # a notebook's Python kernel: on the boxes' environment
            kernel_cmd[0] = str(self._python)
        if self.zmq_over_tcp:
            # Its own connection file, over TCP in the box; the forwarder writes it.
            tcp = str(private / "kernel-tcp.json")
            kernel_cmd = [tcp if arg == km.connection_file else arg for arg in kernel_cmd]
            forwarder += [sys.executable, "-m", "jupyter_ci.server.sandbox.zmq_forward",
                          "--conn", km.connection_file, "--tcp", tcp, "--"]
        kwargs["cmd"] = command(box, [*forwarder, *kernel_cmd])
        kwargs["env"] = inner_env
        kwargs["cwd"] = str(cwd)
        return kwargs

    def _box(self, ci: SandboxSettings, env: dict[str, str], cwd: Path, private: Path,
             executable: str) -> tuple[Box, dict[str, str], list[str]]:
        """Describe the box of this kernel, its environment, and what runs before it."""
        inner, hidden, notebook = self._inside(ci, env, executable)
        files = self._files(env, inner)
        readonly = python_paths(executable, env)
        if self.zmq_over_tcp:  # its forwarder runs on this Python
            readonly = (*readonly, *python_paths(sys.executable, env))
        forwarder: list[str] = []
        way: Egress | None = None
        if notebook is not None and ci.sandbox_network != "host":
            # A notebook's own proxy: its list grows when the user allows a host.
            way = kernel_egress(str(self.kernel_id), notebook_entries(ci, env), env, private,
                                self.log, NOTEBOOK_HINT)
        elif isinstance(ci.sandbox_network, list):
            way = egress(ci.sandbox_network, env, private_base(), self.log)
        if way is not None:
            # An allowlist: the box reaches the host's proxy through a loopback forwarder.
            files.append((way.socket, INSIDE))
            inner.update(way.env)
            readonly, forwarder = (*readonly, *way.readonly), way.argv
        limits = Limits(ci.sandbox_memory_bytes, ci.sandbox_processes, ci.sandbox_tmp_bytes,
                        ci.sandbox_file_bytes, ci.sandbox_open_files, ci.sandbox_cpu_seconds)
        held = guards(f"k-{private.name}", limits, private_base(), self.log)
        self._cgroup = held.cgroup
        # Without a memory cgroup, the whole box's memory is watched (watch.py).
        self._watched = limits.memory_bytes if held.cgroup is None else 0
        if notebook is not None:
            readonly = (*readonly, *notebook.readonly)
        box = Box(workdir=cwd, private=private, limits=limits,
                  readonly=tuple(dict.fromkeys(readonly)), hidden=tuple(dict.fromkeys(hidden)),
                  writable=notebook.writable if notebook else (),
                  devices=notebook.devices if notebook else (),
                  files=tuple(files), host_network=ci.sandbox_network == "host",
                  cgroup_procs=held.cgroup.procs if held.cgroup else (), seccomp=held.seccomp,
                  disable_userns=held.disable_userns)
        return box, inner, forwarder

    def _inside(self, ci: SandboxSettings, env: dict[str, str], executable: str
                ) -> tuple[dict[str, str], list[Path], NotebookBox | None]:
        """Return the box's environment, what it hides, and a notebook's share of the home."""
        spec_env = dict(getattr(self.kernel_spec, "env", None) or {})
        inner = box_environ(env, spec_env)
        session = env.get(ENV_SESSION) == "1"
        inner[ENV_BOXED] = "session" if session else "notebook"
        hidden = list(hidden_paths(env))
        root = published(env, ENV_ROOT)
        if session:
            return inner, [*hidden, *([Path(os.path.realpath(root))] if root else [])], None
        notebook = notebook_box({**env, ENV_ROOT: root}, executable, ci.sandbox_hidden,
                                ci.notebook_environ, ci.sandbox_gpus)
        inner.update(notebook.env)
        self._python = notebook.python
        return inner, [*hidden, *notebook.hidden], notebook

    def _files(self, env: dict[str, str], inner: dict[str, str]) -> list[tuple[Path, str]]:
        """Return the host's files the box shows (the broker's socket, the record secret)."""
        files: list[tuple[Path, str]] = []
        socket = self._broker_socket(env)
        if socket and os.path.exists(socket):
            # The broker through its socket: the box has no network to reach its URL.
            files.append((Path(socket), f"{SOCKET_DIR}/broker.sock"))
            inner[ENV_SOCKET] = f"{SOCKET_DIR}/broker.sock"
            inner[ENV_URL] = "http://localhost/jupyter-ci/broker"
        secret = record_secret(env)
        if secret is not None:
            files.append((secret, str(secret)))
            inner["JUPYTER_DATA_DIR"] = str(secret.parent.parent)
        return files

    def _broker_socket(self, env: dict[str, str]) -> str:
        """Return the broker's socket for this box: its own when the broker runs here."""
        if env.get(ENV_SESSION) == "1":
            return ""  # a REST session's asks run in the server: no way to the model service
        served = sockets.current()
        if served is None or not self.kernel_id:
            return published(env, ENV_BROKER_SOCKET)  # another process's broker, if any
        return str(served.open(str(self.kernel_id)))

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        """Launch the box; its kernel's process id is looked up when first needed."""
        self._kernel_pid = None
        launched = await super().launch_kernel(cmd, **kwargs)
        if self._watched and self.process is not None:
            watch.watch(str(self.kernel_id), self.process.pid, self._watched)
        return launched

    async def send_signal(self, signum: int) -> None:
        """Interrupt the kernel itself; other signals go to the box (bubblewrap)."""
        if signum == signal.SIGINT and self.process is not None:
            pid = self._kernel_pid or _first_non_bwrap(self.process.pid)
            if pid is not None:
                self._kernel_pid = pid
                os.kill(pid, signum)
                return
        await super().send_signal(signum)

    async def cleanup(self, restart: bool = False) -> None:
        """Remove the kernel's private folder once it is gone for good."""
        await super().cleanup(restart=restart)
        if not restart and self.kernel_id:
            close_kernel(str(self.kernel_id))
            watch.forget(str(self.kernel_id))
        if not restart and self._cgroup is not None:
            await asyncio.to_thread(cgroup.remove, self._cgroup)
        if not restart and self.kernel_id:
            served = sockets.current()
            if served is not None:
                served.close(str(self.kernel_id))
            shutil.rmtree(private_folder(str(self.kernel_id), make=False), ignore_errors=True)


def private_base() -> Path:
    """Return this user's folder of kernel folders and sockets: `<tmp>/jupyter-ci-<uid>`.

    Short, as a Unix socket's path must be (108 bytes); made 0700 and checked to be ours and
    not a link, since /tmp is shared.
    """
    base = _base()
    with contextlib.suppress(FileExistsError):
        base.mkdir(mode=0o700)
    info = base.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise SandboxUnavailable(f"{base} is not a private folder of this user: remove it.")
    return base


def private_folder(kernel_id: str, make: bool = True) -> Path:
    """Return a kernel's private folder, named by its id: a restart finds the same one."""
    folder = _base() / kernel_id.replace("-", "")[:16]
    if make:
        private_base()
        folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _base() -> Path:
    return Path(tempfile.gettempdir()) / f"jupyter-ci-{os.getuid()}"


def _first_non_bwrap(pid: int) -> int | None:
    """Find the kernel below bubblewrap's processes (its first descendant not bwrap)."""
    queue = [pid]
    while queue:
        current = queue.pop(0)
        try:
            comm = Path(f"/proc/{current}/comm").read_text().strip()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        if comm != "bwrap":
            return current
        queue.extend(int(child) for child in children)
    return None
