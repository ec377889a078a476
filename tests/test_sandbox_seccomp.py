"""The box's seccomp filter, run by a small BPF interpreter for both machines it knows.

The attacks it stops run for real in tests/security/test_sandbox_limits.py (on this
machine's architecture); here every rule's verdict is checked for x86_64 and aarch64 alike,
and a call of another ABI is refused.
"""

from __future__ import annotations

import errno
import struct

import pytest

from jupyter_ci.server.sandbox import seccomp

CLONE_NEWUSER, CLONE_NEWNET, CLONE_THREAD = 0x10000000, 0x40000000, 0x00010000
SIGCHLD = 17


def run(program: list[tuple[int, int, int, int]], nr: int, arch: int,
        args: tuple[int, ...] = ()) -> int:
    """Run the filter on one call (seccomp_data: nr, arch, ip, args) and return its verdict."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        pc += 1
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x54:
            acc &= k
        elif code == 0x06:
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf


@pytest.mark.parametrize("machine", list(seccomp.ABIS))
@pytest.mark.parametrize("memory", [True, False])
def test_each_rule_for_each_machine(machine: str, memory: bool) -> None:
    abi = seccomp.ABIS[machine]
    n, prog = abi.numbers, seccomp.program(machine, memory)
    eperm, enosys = seccomp.refuse(errno.EPERM), seccomp.refuse(errno.ENOSYS)

    def verdict(name: str, *args: int) -> int:
        return run(prog, n[name], abi.arch, args)

    assert verdict("clone3") == enosys  # libc falls back to clone, whose flags are read
    assert verdict("unshare", CLONE_NEWUSER) == eperm
    assert verdict("unshare", CLONE_NEWNET) == eperm
    assert verdict("clone", CLONE_NEWUSER | SIGCHLD) == eperm
    assert verdict("clone", CLONE_THREAD | SIGCHLD) == seccomp.ALLOW  # threads and forks
    assert verdict("clone", SIGCHLD) == seccomp.ALLOW
    shared_anon = seccomp.MAP_SHARED | seccomp.MAP_ANONYMOUS
    refused = eperm if memory else seccomp.ALLOW
    assert verdict("mmap", 0, 1 << 30, 3, shared_anon, 2**64 - 1, 0) == refused
    assert verdict("mmap", 0, 1 << 30, 3, 0x03 | seccomp.MAP_ANONYMOUS, 0, 0) == refused
    assert verdict("mmap", 0, 1 << 30, 3, 0x02 | seccomp.MAP_ANONYMOUS, 0, 0) == seccomp.ALLOW
    assert verdict("mmap", 0, 1 << 30, 3, seccomp.MAP_SHARED, 5, 0) == seccomp.ALLOW  # a file
    for name in ("memfd_create", "memfd_secret", "shmget"):
        assert verdict(name) == refused
    # The kernel's surfaces a kernel has no use for, and its keyrings: refused in every box.
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        assert verdict(name) == enosys
    for name in ("userfaultfd", "bpf", "perf_event_open", "keyctl", "add_key", "request_key"):
        assert verdict(name) == eperm
    assert run(prog, 1, abi.arch) == seccomp.ALLOW  # anything else
    # Another ABI's numbers mean other calls: refused whatever they are.
    assert run(prog, n["unshare"], 0x40000003, (CLONE_NEWUSER,)) == enosys  # i386
    if abi.foreign_bit:
        assert run(prog, 0x40000000 | n["unshare"], abi.arch, (CLONE_NEWUSER,)) == enosys
