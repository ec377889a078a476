"""What a kernel's box holds, and the bubblewrap command that builds it.

The box starts empty (bubblewrap's own tmpfs root, read-only once built) and gets only:
the system's programs and libraries (`/usr`, `/etc` without its secrets), the kernel's
Python environment read-only, the working directory and a private folder (the connection
file and ZMQ's ipc sockets) read-write, a size-capped `/tmp` and `/dev/shm`, its own
`/proc` and `/dev`, and the sockets it may use. Paths to keep out (Jupyter's runtime and
data folders, the other sessions, the server's root) are hidden under empty read-only
tmpfs wherever a mount above would show them; the deepest mount of a path decides.

Limits are set inside the box, after bubblewrap made its user namespace, so the process
count is the box's own (set before, Linux would count every process of the user).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: The system's programs and libraries (a link, as /bin is on merged-/usr systems, stays one).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
#: What /etc holds that no kernel needs: password hashes, host keys, TLS keys, sudo rules.
ETC_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh",
               "/etc/ssl/private", "/etc/sudoers", "/etc/sudoers.d", "/etc/jupyter")
#: Where the box finds the sockets it is given (broker, egress proxy).
SOCKET_DIR = "/run/jupyter-ci"
#: Bytes of /dev/shm (multiprocessing's semaphores and shared arrays live there).
SHM_BYTES = 64 << 20
#: Bytes of an empty tmpfs that hides a folder (room for the mount points made in it).
HIDE_BYTES = 64 << 10
#: The descriptor bubblewrap reads the seccomp filter from.
SECCOMP_FD = 3


@dataclass(frozen=True)
class Limits:
    """Resource limits of a box's processes (0: no limit), set with `prlimit`."""

    memory_bytes: int = 4 << 30
    processes: int = 256
    tmp_bytes: int = 512 << 20
    file_bytes: int = 1 << 30
    open_files: int = 1024
    cpu_seconds: int = 0

    def prlimit(self) -> list[str]:
        """Return the `prlimit` command that sets these limits, soft and hard, for a command."""
        pairs = (("data", self.memory_bytes), ("nproc", self.processes),
                 ("fsize", self.file_bytes), ("nofile", self.open_files),
                 ("cpu", self.cpu_seconds))
        return ["prlimit", *(f"--{name}={value}" for name, value in pairs if value > 0), "--"]


@dataclass(frozen=True)
class Box:
    """Everything a box gives its kernel beyond the system."""

    #: The kernel's working directory: read-write, its current directory.
    workdir: Path
    #: The kernel's connection file and ipc sockets: read-write, at the same path inside.
    private: Path
    limits: Limits
    #: The kernel's Python environment and other read-only folders, at the same path inside.
    readonly: tuple[Path, ...] = ()
    #: Folders and files never to show, whatever a mount above them shows.
    hidden: tuple[Path, ...] = ()
    #: More read-write folders, at the same path inside (a notebook's: Jupyter's root).
    writable: tuple[Path, ...] = ()
    #: Device nodes passed through (GPUs), at the same path inside.
    devices: tuple[Path, ...] = ()
    #: (host file, path inside): read-only files, such as the sockets given to the box.
    files: tuple[tuple[Path, str], ...] = ()
    #: Share the host's network (else the box has only its own loopback).
    host_network: bool = False
    #: The cgroup files (`cgroup.procs`) the box's first process joins before bubblewrap.
    cgroup_procs: tuple[Path, ...] = ()
    #: The seccomp filter bubblewrap loads (seccomp.py), kept where no box can change it.
    seccomp: Path | None = None
    #: Use bubblewrap's --disable-userns (no user namespace, so no network one, inside).
    disable_userns: bool = False


def command(box: Box, argv: Sequence[str]) -> list[str]:
    """Return the bubblewrap command that runs `argv` in the box."""
    args = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL"]
    if box.disable_userns:
        args.append("--disable-userns")
    if box.seccomp is not None:
        args += ["--seccomp", str(SECCOMP_FD)]
    if box.host_network:
        args.append("--share-net")
    args += _system()
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
             "--size", str(box.limits.tmp_bytes), "--tmpfs", "/tmp"]
    for device in box.devices:
        args += ["--dev-bind", str(device), str(device)]
    args += _mounts(box)
    # Built: nothing but the writable mounts can be written (a tmpfs would fill memory).
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", str(box.workdir)]
    # jupyter_client's launcher adds the server's pid; in the box's own PID namespace
    # ipykernel would take its parent (bubblewrap's init, pid 1) for gone and exit.
    args += ["--unsetenv", "JPY_PARENT_PID"]
    return [*_launcher(box), *args, "--", *box.limits.prlimit(), *argv]


def _launcher(box: Box) -> list[str]:
    """Return what starts bubblewrap: a shell that joins the cgroup and opens the filter.

    It `exec`s bubblewrap, so bubblewrap keeps its process id (and the box, every process
    of it) in the cgroup joined first: nothing of the box ever runs outside it.
    """
    if not box.cgroup_procs and box.seccomp is None:
        return []
    script = "".join(f"echo $$ > {shlex.quote(str(procs))} && " for procs in box.cgroup_procs)
    script += 'exec "$@"'
    if box.seccomp is not None:
        script += f" {SECCOMP_FD}< {shlex.quote(str(box.seccomp))}"
    return ["/bin/sh", "-c", script, "jupyter-ci-box"]


def _system() -> list[str]:
    """Mount the system's programs and libraries read-only, its secrets hidden."""
    args: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for secret in (*ETC_SECRETS, *_etc_private()):
        if os.path.isdir(secret) and not os.path.islink(secret):
            args += ["--size", str(HIDE_BYTES), "--tmpfs", secret, "--remount-ro", secret]
        elif os.path.lexists(secret):
            args += ["--ro-bind", "/dev/null", secret]
    return args


@functools.lru_cache(maxsize=1)
def _etc_private() -> tuple[str, ...]:
    """Return what in /etc others may not read, for a root server's boxes (once).

    A box of a root server runs as root in its user namespace, which reads root's 0600
    files as their owner (pg_hba.conf, a cloud's credentials): those are not there at all.
    """
    if os.geteuid() != 0:
        return ()  # the box runs as the server's user: the file modes decide, as outside
    found: list[str] = []
    for folder, dirs, files in os.walk("/etc"):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if not stat.S_ISLNK(mode) and not mode & stat.S_IROTH and path not in ETC_SECRETS:
                found.append(path)
        # Below a folder hidden whole, nothing more need be hidden.
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in found]
    return tuple(found)


#: How a mount is made, in the order mounts at one path are made (the last one shows).
_HIDE, _READ, _FILE, _WRITE = range(4)


def _mounts(box: Box) -> list[str]:
    """Mount the box's folders and files, shallow ones first: the deepest mount decides."""
    ops = {(path, _HIDE, "") for path in box.hidden if os.path.lexists(path)}
    ops |= {(path, _READ, "") for path in box.readonly if os.path.exists(path)}
    ops |= {(Path(inside), _FILE, str(source)) for source, inside in box.files}
    ops |= {(path, _WRITE, "") for path in (*box.writable, box.workdir, box.private)}
    args: list[str] = []
    made: dict[Path, int] = {}
    for path, how, source in sorted(ops, key=lambda op: (len(op[0].parts), op[1])):
        if how == _HIDE and not _shown(path, made):
            continue  # nothing above shows it: a mount would only show its name
        made[path] = how
        if how == _WRITE:
            args += ["--bind", str(path), str(path)]
        elif how == _READ:
            args += ["--ro-bind", str(path), str(path)]
        elif how == _FILE:
            args += ["--ro-bind", source, str(path)]
        elif path.is_dir() and not path.is_symlink():
            args += ["--size", str(HIDE_BYTES), "--tmpfs", str(path)]
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    hidden = [str(path) for path, how in made.items() if how == _HIDE and path.is_dir()]
    # Read-only once the mount points of deeper folders and files were made in them.
    return args + [arg for path in hidden for arg in ("--remount-ro", path)]


def _shown(path: Path, made: dict[Path, int]) -> bool:
    """Tell whether the deepest mount made above `path` shows the host's files there."""
    above = [mount for mount in made if path.is_relative_to(mount)]
    if not above:
        return False  # under the box's own empty root
    return made[max(above, key=lambda mount: len(mount.parts))] in (_READ, _WRITE)


def python_paths(executable: str, env: dict[str, str]) -> tuple[Path, ...]:
    """Return the folders an interpreter imports from: its prefixes and its sys.path."""
    found = _probe(executable, env.get("PYTHONPATH", ""))
    real = Path(os.path.realpath(executable)).parent.parent
    return tuple(dict.fromkeys([*found, real]))


@functools.lru_cache(maxsize=32)
def _probe(executable: str, pythonpath: str) -> tuple[Path, ...]:
    """Ask the interpreter where it imports from (once per interpreter and PYTHONPATH)."""
    code = ("import sys; "
            "print('\\n'.join([sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]))")
    env = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": pythonpath}
    try:
        done = subprocess.run([executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        # Not a Python (a compiled kernel): its own folder is what it needs.
        return (Path(os.path.realpath(executable)).parent,)
    return tuple(Path(line) for line in done.stdout.splitlines() if line.strip())


@functools.lru_cache(maxsize=1)
def disables_userns() -> bool:
    """Tell whether this bubblewrap can refuse user namespaces in its boxes (0.8 and later)."""
    trial = ["bwrap", "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "true"]
    try:
        return subprocess.run(trial, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def warm() -> None:
    """Do the checks a first box would wait for (a thread at the server's start calls it)."""
    problem()
    _etc_private()


@functools.lru_cache(maxsize=1)
def problem() -> str | None:
    """Say why kernels cannot be boxed here (None when they can): checked once."""
    if not sys.platform.startswith("linux"):
        return (f"the sandbox needs Linux and bubblewrap; this is {sys.platform}, so kernels "
                "run unboxed (run them in containers: see the README's sandbox section)")
    for tool in ("bwrap", "prlimit"):
        if shutil.which(tool) is None:
            package = "bubblewrap" if tool == "bwrap" else "util-linux"
            return (f"`{tool}` is not installed: install the {package} package (Debian/"
                    f"Ubuntu: `apt-get install {package}`; Fedora: `dnf install {package}`)")
    trial = ["bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "true"]
    try:
        done = subprocess.run(trial, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        return f"bubblewrap could not run ({err})"
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no reason"
        return (f"bubblewrap cannot make a box here ({why}): user namespaces may be off "
                "(sysctl kernel.unprivileged_userns_clone=1, or user.max_user_namespaces > 0)")
    return None
