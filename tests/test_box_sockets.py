"""The broker's sockets for boxes: a process short of descriptors pauses, logs once, resumes.

The flood of a box itself is tests/security/test_sandbox_flood.py; here the process that
serves the socket runs out of descriptors for another reason, and its accept must neither
spin nor log a line per turn of the loop (tornado's own accept handler raises EMFILE on
every turn), and must accept again once descriptors are free.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

SERVER = r"""
import asyncio, json, logging, os, sys
from pathlib import Path
from tornado import web
from tornado.ioloop import IOLoop
from jupyter_ci.server.broker.unix_socket import CappedSocket

class Ok(web.RequestHandler):
    def get(self):
        self.finish("ok")

lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(f"{record.name}: {record.getMessage()}")
for name in ("box-sockets", "asyncio", "tornado"):
    logging.getLogger(name).addHandler(Keep())
    logging.getLogger(name).propagate = False

async def main():
    app = web.Application([("/", Ok)])
    CappedSocket(Path(sys.argv[1]), app, 1000, logging.getLogger("box-sockets"),
                 IOLoop.current()).start()
    fillers = []
    try:
        while True:
            fillers.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    print("full", flush=True)
    await asyncio.sleep(float(sys.argv[2]))  # clients wait in the backlog meanwhile
    for fd in fillers:
        os.close(fd)
    await asyncio.sleep(float(sys.argv[2]))
    print(json.dumps(lines), flush=True)

IOLoop.current().run_sync(main)
"""


def test_out_of_descriptors_the_socket_pauses_logs_once_and_accepts_again(
        tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    proc = subprocess.Popen(["prlimit", "--nofile=128:128", "--", sys.executable, "-c", SERVER,
                             str(path), "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "full"
        clients = []
        for _ in range(20):
            client = socket.socket(socket.AF_UNIX)
            client.settimeout(60)  # a hang guard: they are answered once descriptors free up
            client.connect(str(path))
            client.sendall(b"GET / HTTP/1.1\r\nHost: box\r\n\r\n")
            clients.append(client)
        answers = [client.recv(4096) for client in clients]
        lines = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    assert all(answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")
               for answer in answers), answers
    # One line said what happened and what to do; no traceback per turn of the loop.
    assert len(lines) == 1, lines[:5]
    assert "short of file descriptors" in lines[0] and "ulimit -n" in lines[0]
