"""Settings by service: what the kernel and server share, REST sessions', the sandbox's.

Each service reads only its own class: a kernel's `%%ask` reads `JupyterCI` (config.py), the
sandbox provisioner `SandboxSettings`, the sessions service `SessionSettings` (the server
holds all three as `ServerSettings`). Every one is set as `c.JupyterCI.<name>`: one place
for a user's jupyter-ci settings, the spelling every config and page already uses.
"""

from __future__ import annotations

import os
from typing import Any

from traitlets import Bool, Enum, Float, Int, List, TraitType, Unicode, Union
from traitlets.config import Config, Configurable

#: The config section every jupyter-ci setting is read from.
SECTION = "JupyterCI"


class Settings(Configurable):
    """A service's part of the jupyter-ci settings, set as `c.JupyterCI.<name>`."""

    @classmethod
    def section_names(cls) -> list[str]:
        """Read `c.JupyterCI` only, whichever service's class this is."""
        return [SECTION]

    def _load_config(self, cfg: Config, section_names: list[str] | None = None,
                     traits: dict[str, TraitType[Any, Any]] | None = None) -> None:
        # Another service's setting in the shared section is not "unrecognized" here.
        section = cfg.get(SECTION)
        if isinstance(section, Config):
            mine = self.traits(config=True)
            theirs = {name for name in _declared() if name not in mine}
            cfg = Config(cfg)
            cfg[SECTION] = Config({k: v for k, v in section.items() if k not in theirs})
        super()._load_config(cfg, section_names, traits)


def _declared() -> set[str]:
    """Return every setting a service's class declares."""
    found: set[str] = set()
    classes: list[type[Settings]] = [Settings]
    while classes:
        cls = classes.pop()
        found.update(cls.class_own_traits(config=True))
        classes.extend(cls.__subclasses__())
    return found


class SessionSettings(Settings):
    """The REST sessions service's settings: `c.JupyterCI.<name>`."""

    session_root = Unicode(
        "",
        help="Directory under which each REST session gets its working directory. Default: "
        "`.jupyter-ci-sessions` in the server's root_dir (hidden from the file browser).",
    ).tag(config=True)
    session_idle_timeout = Float(
        3600.0, help="Seconds a REST session may stay unused before it is shut down and its "
        "directory removed (default 3600; 0 = never).",
    ).tag(config=True)
    max_sessions = Int(
        20, help="REST sessions that may exist at once; more get HTTP 429 (default 20).",
    ).tag(config=True)
    session_pool = Int(
        1, help="Kernels kept started in advance for new REST sessions, from the first "
        "session on: a server whose REST API is never used starts none (default 1; 0 = no "
        "pool at all, whatever session_pool_max says). The pool's minimum: see "
        "session_pool_max.",
    ).tag(config=True)
    session_pool_max = Int(
        20, help="Kernels the pool may grow to under bursts (default 20, as max_sessions): "
        "when new sessions drain the pool, it sets its size to the number asked for in the "
        "last 2 s, so the next burst that large finds its kernels started; it never holds more "
        "than max_sessions leaves room for, and shrinks back to session_pool after "
        "session_pool_idle_timeout. Kernels start as many at a time as the machine has cores "
        "(up to 4); a burst that finds the pool empty waits for them in turn.",
    ).tag(config=True)
    session_pool_idle_timeout = Float(
        120.0, help="Seconds without a new REST session after which a pool that grew under "
        "a burst shuts its extra kernels down, back to session_pool (default 120; 0 = never).",
    ).tag(config=True)
    session_run_slots = Int(
        3 * (os.cpu_count() or 1), help="REST runs (executes, ask steps) let into their "
        "kernels at once; more wait their turn in order of arrival, so under load every "
        "session gets its share of the cores rather than some waiting behind others. A run "
        "holds its turn for 50 ms at most: a longer one goes on and lets the next in "
        "(default: three per core; 0 = no limit).",
    ).tag(config=True)
    session_sandbox = Enum(
        ["auto", "always", "never"], "auto",
        help="Run REST sessions' kernels in a bubblewrap box (their own folder, no network, "
        "limits; see sandbox_*): 'auto' (default): where bubblewrap works, every session is "
        "boxed (a kernel <name> runs its <name>-sandboxed kernelspec) or refused with a 400 "
        "when its kernel has none, whatever kernel or language the client asks for; only "
        "where no box can run at all are sessions started unboxed, with a warning in the log "
        "and \"sandboxed\": false and the reason in the session's info. 'always': as 'auto', "
        "and sessions are refused where no box can run. 'never': the kernel asked for, "
        "unboxed (its code can read the server's files and token).",
    ).tag(config=True)
    sandbox_disk_bytes = Int(
        10 << 30, min=0, help="Bytes on disk a boxed REST session's folder may hold (default "
        "10737418240, 10 GiB; 0 = no cap). Counted about every second while code runs and at "
        "the end of each run (no filesystem quota is needed): a run that grows the folder "
        "past it is interrupted (its kernel restarted if it ignores the interrupt), and "
        "every run that ends with the folder over it fails with DiskLimitExceeded, saying "
        "to delete files; a run that deletes goes on.",
    ).tag(config=True)
    sandbox_disk_files = Int(
        100_000, min=0, help="Files and folders a boxed REST session's folder may hold "
        "(default 100000; 0 = no cap); counted and enforced as sandbox_disk_bytes is. A count "
        "reads at most twice this many entries, in a thread.",
    ).tag(config=True)
    max_upload_bytes = Int(
        100 * 1024 * 1024, help="Largest file, in bytes, a REST upload may send (default "
        "104857600, 100 MiB); larger ones get HTTP 413 before they are read.",
    ).tag(config=True)
    max_code_bytes = Int(
        1024 * 1024, help="Largest code, in bytes, one REST execute may send (default 1 MiB).",
    ).tag(config=True)
    session_run_output_bytes = Int(
        16 * 1024 * 1024, min=0,
        help="Bytes of outputs one REST execute (or ask step) keeps while it runs and returns "
        "in its result: past it the middle is dropped with a note, the head and tail kept, and "
        "one output over half of it is cut the same way (a display becomes a text/plain "
        "note). A streaming execute's `output` events still carry every output whole "
        "(default 16777216, 16 MiB; 0 = no cap).",
    ).tag(config=True)
    session_history_output_bytes = Int(
        1024 * 1024, min=0,
        help="Bytes of one output (a stream's text, a display's data) a REST session keeps "
        "for its notebook (GET .../notebook): a longer stream keeps its head and tail with a "
        "note where cut, a larger display becomes a text/plain note (default 1048576, 1 MiB; "
        "0 = no cap).",
    ).tag(config=True)
    session_history_bytes = Int(
        32 * 1024 * 1024, min=0,
        help="Bytes a REST session keeps in all for its notebook (GET .../notebook): past "
        "it, the oldest outputs are dropped first and replaced by a note; code and prompts "
        "are kept (default 33554432, 32 MiB; 0 = no cap).",
    ).tag(config=True)
    restart_on_stuck_interrupt = Bool(
        True,
        help="Restart a REST session's kernel when a run that timed out does not stop within "
        "10 s of its interrupt (code that ignores SIGINT, or is stuck in C): the run reports "
        "`timeout` with \"kernel restarted, variables lost\" and the session is usable at once. "
        "Off: the session is `dead` until the client restarts it (default True).",
    ).tag(config=True)
    session_orphans_kept = Float(
        86400.0, min=0.0,
        help="Seconds the directory of a session lost when the server was killed is kept, "
        "under `<session_root>/.lost/<session id>`, before a later start or the idle culler "
        "removes it (default 86400, a day; 0 = removed at the next start).",
    ).tag(config=True)
    approval_timeout = Float(
        600.0, min=1.0,
        help="Seconds a REST (or MCP) ask waits for the answer to a waiting_for_user event "
        "(a step or plan that waits for approval, see approval; answered by its approval_id) "
        "before it stops, saying no answer came; nothing more runs (default 600).",
    ).tag(config=True)
    agent_notebooks = Enum(
        ["never", "allowed", "opened", "always"], default_value="opened",
        help="Which of the user's own notebooks agents (MCP clients, REST apps) may change: "
        "insert, edit and run cells in, in the notebook's own kernel. 'opened' (default): "
        "those the user opened in JupyterLab since this server started, and those allowed "
        "one by one (the command 'Let agents edit and run this notebook'); 'allowed': only "
        "those; 'always': every notebook; 'never': none. Reading a notebook is not limited.",
    ).tag(config=True)
    agent_notebooks_file = Unicode(
        "",
        help="The file that keeps which notebooks the user allowed agents to change, one by "
        "one (mode 0600). Default: jupyter-ci-agent-notebooks.json in Jupyter's data "
        "directory (`jupyter --data-dir`), outside every notebook and box.",
    ).tag(config=True)


class SandboxSettings(Settings):
    """The sandbox provisioner's settings (how a kernel's box is made): `c.JupyterCI.<name>`."""

    notebook_sandbox = Enum(
        ["auto", "always", "never"], default_value="auto",
        help="Whether the kernels of the user's notebooks (JupyterLab, Notebook 7, the MCP "
        "notebook door: every kernel this server starts that is not a REST session's) run in "
        "a box. 'auto' (default): boxed where bubblewrap works, unless the user chose 'Run "
        "this notebook unboxed' for that notebook; unboxed, with the reason in the status "
        "bar, where no box can run or the kernel has no way to be boxed. 'always': boxed or "
        "not started, and the unboxed choice is refused. 'never': as the kernelspec says. "
        "Under JupyterHub the Hub's policy may raise it. Headless runs outside a server "
        "(nbclient, papermill) run the kernelspec the notebook names: 'Python 3 (sandboxed)' "
        "is boxed there too.",
    ).tag(config=True)
    notebook_network = List(
        Unicode(),
        help="Hosts every notebook's box may reach besides its package index (entries as in "
        "sandbox_network's list; default none). The user adds hosts for one notebook with "
        "JupyterLab's 'Allow <host> for this notebook'; they are kept outside the notebook.",
    ).tag(config=True)
    notebook_package_index = Bool(
        True,
        help="Let notebooks' boxes reach the package index, so %pip install works: pip's "
        "configured index-url and extra-index-url hosts (PIP_INDEX_URL, pip.conf), or "
        "pypi.org and files.pythonhosted.org (default True). Packages a box installs go to "
        "a folder of the user's boxes only (`jupyter-ci/box-packages` in Jupyter's data "
        "directory), never into the kernel's environment.",
    ).tag(config=True)
    notebook_environ = List(
        Unicode(),
        help="Names of the server's environment variables a notebook's box gets besides the "
        "usual ones (locale, PATH, Python's and pip's variables, TLS bundles, proxies are "
        "replaced by the box's own); default none. Variables can hold secrets: name only "
        "those a notebook needs.",
    ).tag(config=True)
    sandbox_hidden = List(
        Unicode(),
        help="More paths no box shows, besides the built-in list of secrets (docs/security.md:"
        " ~/.ssh, ~/.aws, keyrings, browser profiles, shell histories, Jupyter's runtime and "
        "data folders...). A leading ~ is the user's home. Default none.",
    ).tag(config=True)
    sandbox_gpus = Bool(
        True,
        help="Pass the machine's GPU device nodes (/dev/nvidia*, /dev/dri) into boxes where "
        "they exist (default True).",
    ).tag(config=True)

    sandbox_network = Union(
        [Enum(["none", "host"]), List(Unicode())], default_value="none",
        help="What a sandboxed kernel may reach on the network: 'none' (default: only its "
        "own loopback; the model is reached through the server's socket), a list of host "
        "names or host:port (reached through an egress proxy the server runs, e.g. "
        "[\"pypi.org\", \"files.pythonhosted.org\"] for %pip install; anything else "
        "refused), or 'host' (the host's whole network). List entries: exact names (any "
        "case), IP addresses or *.domain (its subdomains); without :port, ports 80 and 443. "
        "Loopback, private and link-local addresses are reached only when listed as "
        "addresses, whatever a listed name resolves to.",
    ).tag(config=True)
    sandbox_memory_bytes = Int(
        4 << 30, help="Memory a sandboxed kernel's box may use, in bytes (default 4294967296, "
        "4 GiB; 0 = no limit). Each process's heap and private mappings are capped (past it, "
        "allocations fail with MemoryError and the kernel lives); where the server can make "
        "a memory cgroup (as root, or with a delegated cgroup v2) the box's whole memory, "
        "shared mappings and memfds included, is capped too, and a box over it has its "
        "largest process ended; where it cannot, the server watches the memory the box's "
        "processes hold together (every 0.2 s) and ends the whole box past it, and shared "
        "anonymous memory, memfds and SysV shared memory are refused in the box.",
    ).tag(config=True)
    sandbox_processes = Int(
        256, help="Processes and threads a sandboxed kernel's box may hold at once (default "
        "256; 0 = no limit); past it, fork and thread starts fail. Held by a pids cgroup per "
        "box where the server can make one, else by RLIMIT_NPROC, which Linux does not apply "
        "to root: a root server that cannot make cgroups says so in its log.",
    ).tag(config=True)
    sandbox_tmp_bytes = Int(
        512 << 20, help="Size of a sandboxed kernel's private /tmp (its HOME too), in bytes "
        "(default 536870912, 512 MiB).",
    ).tag(config=True)
    sandbox_file_bytes = Int(
        1 << 30, help="Largest file a sandboxed kernel may write, in bytes (default "
        "1073741824, 1 GiB; 0 = no limit); a write past it fails with 'File too large'.",
    ).tag(config=True)
    sandbox_open_files = Int(
        1024, help="Files and sockets a sandboxed kernel process may hold open (default 1024).",
    ).tag(config=True)
    sandbox_cpu_seconds = Int(
        0, help="CPU seconds a sandboxed kernel process may use over its life before it is "
        "ended (default 0 = no limit; a restart starts the count again).",
    ).tag(config=True)
    sandbox_broker_connections = Int(
        8, min=1, help="Connections a sandboxed kernel's box may hold open at once to the "
        "model service (its own Unix socket): past them the socket stops accepting and "
        "further connections wait in the box's backlog, so no box can exhaust the server's "
        "file descriptors. A connection must send its request's headers within 10 s and its "
        "body within 30 s, and serves one request (default 8).",
    ).tag(config=True)
