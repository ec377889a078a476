"""The box's limits hold for root as for anyone (issue 31.6): processes, shared memory,
nested namespaces, the session's disk and files.

Each attack runs in a boxed REST session of a real server started as an unprivileged user
and, when the tests run as root, of one started as root (as many container images run
Jupyter): Linux exempts uid 0 from RLIMIT_NPROC even in a user namespace, and RLIMIT_DATA
counts no shared memory, so a root server's boxes need their cgroup; an unprivileged one's
boxes without a cgroup need the seccomp filter. The server and another session keep
answering, and the attacked session recovers with a restart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.security.test_sandbox import FORKS, Session, call, contained
from tests.security.unprivileged import WHO, Server, running

LIMITS = {"sandbox_memory_bytes": 256 << 20, "sandbox_processes": 64,
          "sandbox_disk_bytes": 64 << 20, "sandbox_disk_files": 2000}


@pytest.fixture(scope="module", params=WHO)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A server whose sessions are boxed, run by the user of this parameter."""
    with running(request.param, {"session_pool": 0, "session_sandbox": "always", **LIMITS}
                 ) as started:
        yield started


def test_a_fork_bomb_stops_at_the_process_limit(server: Server) -> None:
    with Session(server) as attacked, Session(server) as witness:
        out = attacked.text(FORKS)
        made = int(out.split("forked")[1])
        assert "Resource temporarily unavailable" in out, out
        assert made < LIMITS["sandbox_processes"]
        contained(server, attacked, witness)


TOUCH = """
for i in range(0, len(m), 4096):
    m[i] = 1
print("written", len(m) >> 20, "MiB")
"""
SHARED = {
    "mmap": "import mmap\nm = mmap.mmap(-1, 768 << 20)\n" + TOUCH,
    "memfd": ("import mmap, os\nfd = os.memfd_create('fill')\nos.ftruncate(fd, 768 << 20)\n"
              "m = mmap.mmap(fd, 768 << 20)\n" + TOUCH),
    "shm": ("import ctypes, mmap\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "libc.shmget.restype = ctypes.c_int\n"
            "ident = libc.shmget(0, ctypes.c_size_t(768 << 20), 0o1600)\n"
            "assert ident >= 0, ctypes.get_errno()\nlibc.shmat.restype = ctypes.c_void_p\n"
            "address = libc.shmat(ident, None, 0)\nlibc.shmctl(ident, 0, None)\n"
            "m = (ctypes.c_char * (768 << 20)).from_address(address)\n" + TOUCH),
}


@pytest.mark.parametrize("kind", list(SHARED))
def test_shared_memory_counts_against_the_memory_limit(server: Server, kind: str) -> None:
    with Session(server) as attacked, Session(server) as witness:
        result = attacked.run(SHARED[kind], timeout=120)
        shown = str(result["outputs"])
        # Refused (the filter) or ended by the box's memory cgroup: never 768 MiB in 256.
        assert result["status"] != "ok" and "written" not in shown, result
        contained(server, attacked, witness)


#: Five processes of 200 MiB each: each within the box's 256 MiB (RLIMIT_DATA), together
#: four times it. They hold it for 20 s and then say so.
MANY = """
import subprocess, sys
hold = "m = bytearray(200 << 20)\\nfor i in range(0, len(m), 4096): m[i] = 1\\n" \\
       "import time; time.sleep(20); print('held')"
children = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(5)]
print("exits", sorted(child.wait() for child in children))
"""


def test_the_memory_limit_holds_for_the_whole_box(server: Server) -> None:
    with Session(server) as attacked, Session(server) as witness:
        result = attacked.run(MANY, timeout=120)
        shown = str(result["outputs"])
        # Its cgroup (root here) ends processes until the box is within it, the server's
        # watch (watch.py, without a cgroup) ends the box: never 1,000 MiB held in 256 MiB.
        assert shown.count("held") <= 1 and "exits [0, 0, 0, 0, 0]" not in shown, result
        contained(server, attacked, witness)


NAMESPACES = """
import ctypes, subprocess
libc = ctypes.CDLL(None, use_errno=True)
for name, flag in (("user", 0x10000000), ("net", 0x40000000), ("mount", 0x00020000)):
    print("unshare", name, "refused" if libc.unshare(flag) != 0 else "MADE")
for flags in ("-U", "-n", "-Un", "-Ur"):
    done = subprocess.run(["unshare", flags, "true"], capture_output=True)
    print("unshare", flags, "refused" if done.returncode else "MADE")
"""


def test_nested_namespaces_are_refused(server: Server) -> None:
    with Session(server) as session:
        out = session.text(NAMESPACES)
    assert out.count("refused") == 7 and "MADE" not in out, out


SURFACES = """
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
n = {"x86_64": {"keyctl": 250, "add_key": 248, "io_uring_setup": 425, "userfaultfd": 323,
                "bpf": 321, "perf_event_open": 298},
     "aarch64": {"keyctl": 219, "add_key": 217, "io_uring_setup": 425, "userfaultfd": 282,
                 "bpf": 280, "perf_event_open": 241}}[platform.machine()]
def call(name, *args):
    done = libc.syscall(ctypes.c_long(n[name]), *args)
    print(name, os.strerror(ctypes.get_errno()) if done < 0 else "MADE")
call("keyctl", ctypes.c_long(0), ctypes.c_long(-3), ctypes.c_long(1))  # the session keyring
call("add_key", b"user", b"planted", b"x", ctypes.c_size_t(1), ctypes.c_long(-3))
call("io_uring_setup", ctypes.c_uint(4), ctypes.create_string_buffer(120))
call("userfaultfd", ctypes.c_long(0))
call("bpf", ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
call("perf_event_open", ctypes.create_string_buffer(128), ctypes.c_long(0), ctypes.c_long(-1),
     ctypes.c_long(-1), ctypes.c_long(0))
"""


def test_the_keyrings_io_uring_bpf_and_their_kin_are_refused(server: Server) -> None:
    """Run unboxed, each call succeeds (bpf says EINVAL to these arguments): the host's
    session keyring would be read and written, io_uring and userfaultfd set up."""
    with Session(server) as session:
        out = session.text(SURFACES)
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    assert lines == {"keyctl": "Operation not permitted", "add_key": "Operation not permitted",
                     "io_uring_setup": "Function not implemented",
                     "userfaultfd": "Operation not permitted",
                     "bpf": "Operation not permitted",
                     "perf_event_open": "Operation not permitted"}, out


FILL = {
    # Growing slowly enough (20 MiB/s, 250 files/s at most) that a count a second stops it
    # long before the loop's end, on any machine; unstopped, it ends and prints "done".
    "bytes": ("import os, time\nos.makedirs('fill', exist_ok=True)\nchunk = b'x' * (1 << 20)\n"
              "for i in range(600):\n"
              "    with open(f'fill/{i}.bin', 'wb') as f:\n        f.write(chunk)\n"
              "    time.sleep(0.05)\nprint('done')"),
    "files": ("import os, time\nos.makedirs('fill', exist_ok=True)\n"
              "for i in range(800):\n    for j in range(50):\n"
              "        open(f'fill/{i}-{j}', 'w').close()\n    time.sleep(0.2)\nprint('done')"),
}


@pytest.mark.parametrize("cap", list(FILL))
def test_a_run_past_the_disk_cap_is_stopped_and_says_what_to_do(server: Server, cap: str
                                                                ) -> None:
    setting = f"sandbox_disk_{cap}"
    with Session(server) as attacked, Session(server) as witness:
        result = attacked.run(FILL[cap], timeout=180)
        printed = [o["text"] for o in result["outputs"] if o["output_type"] == "stream"]
        assert result["status"] == "error" and "done\n" not in printed, result
        error = result["outputs"][-1]
        assert error["ename"] == "DiskLimitExceeded", result
        assert setting in error["evalue"] and "delete files" in error["evalue"], error
        # Still over the cap: the next run says so too, and what to do...
        again = attacked.run("print('hello')")
        assert again["status"] == "error" and again["outputs"][-1]["ename"] == (
            "DiskLimitExceeded") and "hello" in str(again["outputs"]), again
        # ...a run that deletes goes on, and the session is back to normal.
        assert attacked.run("import shutil\nshutil.rmtree('fill')")["status"] == "ok"
        assert attacked.text("print('back')").strip() == "back"
        contained(server, attacked, witness)


LEFT = ("import subprocess, sys\n"
        "writer = ('import time\\nchunk = bytes(1 << 20)\\nfor i in range(300):\\n'\n"
        "          '    open(f\"left-{i}.bin\", \"wb\").write(chunk)\\n    time.sleep(0.05)')\n"
        "subprocess.Popen([sys.executable, '-c', writer], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print('left running')")


def folder_bytes(session: Session) -> int:
    """Return what the session's files hold, as its files route lists them."""
    status, listed = call(session.server, "GET", f"jupyter-ci/sessions/{session.id}/files")
    assert status == 200, listed
    entries = listed["files"] if isinstance(listed, dict) else listed
    return sum(int(entry["size"]) for entry in entries)


def test_a_process_left_writing_between_runs_is_stopped_at_the_disk_cap(server: Server) -> None:
    """The attack: a run starts a writer in the background and returns at once; between runs
    no run's watch counts the folder. Unstopped, the writer puts 300 MiB into a 64 MiB
    folder (20 MiB/s at most, so a count a second catches it long before)."""
    with Session(server) as attacked:
        assert attacked.text(LEFT).strip() == "left running"
        deadline, sizes = time.monotonic() + 60, [-1]
        # Until the folder stops growing (the writer ended, stopped or done).
        while time.monotonic() < deadline:
            time.sleep(1.0)
            sizes.append(folder_bytes(attacked))
            if len(sizes) > 4 and sizes[-1] == sizes[-4] > 0:
                break
        assert 64 << 20 < sizes[-1] < 200 << 20, sizes
        # The next run says what happened, and runs in the new kernel.
        result = attacked.run("print('after')")
        said = str(result["outputs"])
        assert "kernel was restarted between runs" in said and "sandbox_disk_bytes" in said
        assert result["outputs"][0]["name"] == "stderr" and "after" in said, result
        assert attacked.run("import glob, os\nfor f in glob.glob('left-*'):\n"
                            "    os.remove(f)")["status"] == "ok"


DEAF = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "chunk = b'x' * (1 << 20)\nfor i in range(600):\n"
        "    with open(f'deaf-{i}.bin', 'wb') as f:\n        f.write(chunk)\n"
        "    time.sleep(0.05)\nprint('done')")


def test_a_run_deaf_to_the_interrupt_is_stopped_by_a_restart(server: Server) -> None:
    with Session(server) as attacked:
        result = attacked.run(DEAF, timeout=180)
        assert result["status"] == "error", result
        assert result["outputs"][-1]["ename"] == "DiskLimitExceeded", result
        assert "kernel restarted" in str(result["outputs"]), result
        assert attacked.run("import glob, os\nfor f in glob.glob('deaf-*'):\n"
                            "    os.remove(f)")["status"] == "ok"
