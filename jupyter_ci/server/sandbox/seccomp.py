"""The seccomp filter bubblewrap loads into a box (`--seccomp FD`): a small BPF program.

No BPF library is installed here, so this writes the few instructions itself. The filter:

- refuses system calls of another ABI than the machine's (x86_64's i386 and x32 calls carry
  other numbers, which would slip past the rules below), with ENOSYS;
- refuses new namespaces: `unshare` and `clone` with any CLONE_NEW* flag (EPERM), and
  `clone3` (ENOSYS, so libc falls back to `clone`, whose flags a filter can read);
- refuses the kernel's attack surfaces a kernel has no use for: `io_uring_setup`,
  `io_uring_enter` and `io_uring_register` (ENOSYS: libraries fall back to plain I/O),
  `userfaultfd`, `bpf` and `perf_event_open` (EPERM, as Docker's default profile does);
- refuses the kernel's keyrings: `keyctl`, `add_key` and `request_key` (EPERM), so a box
  reads none of the server's session keyring (Kerberos tickets, fscrypt keys) nor adds to it;
- with `memory=True` (a box without a memory cgroup), refuses the memory RLIMIT_DATA does not
  count: `memfd_create`, `memfd_secret`, SysV `shmget`, and `mmap` with MAP_SHARED and
  MAP_ANONYMOUS (EPERM). Shared maps of files stay allowed: their files live in the capped
  /tmp and /dev/shm or count as disk (Python's multiprocessing uses files in /dev/shm).

Everything else is allowed: a denylist, not an allowlist (see docs/sandbox.md for why). The
numbers are those of x86_64 and aarch64 (asm/unistd.h).
"""

from __future__ import annotations

import errno
import hashlib
import os
import platform
import struct
from dataclasses import dataclass
from pathlib import Path

# BPF opcodes (linux/bpf_common.h, linux/filter.h).
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ, _JGE, _JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_JEQ/JGE/JSET | BPF_K
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
# seccomp's verdicts (linux/seccomp.h) and where seccomp_data keeps each field.
ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH, _ARGS = 0, 4, 16
#: Every CLONE_NEW* flag: NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
CLONE_NEW = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000
MAP_SHARED, MAP_ANONYMOUS = 0x01, 0x20
#: x32 system calls on x86_64 carry this bit in their number.
_X32 = 0x40000000


#: io_uring's calls: the same numbers on every architecture.
_IO_URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
#: Calls refused whatever the box, and how.
REFUSED = {**dict.fromkeys(_IO_URING, errno.ENOSYS),
           **dict.fromkeys(("userfaultfd", "bpf", "perf_event_open", "keyctl", "add_key",
                            "request_key"), errno.EPERM)}


@dataclass(frozen=True)
class Abi:
    """A machine's audit architecture and the numbers of the calls the filter reads."""

    arch: int
    numbers: dict[str, int]
    foreign_bit: int = 0


ABIS = {
    "x86_64": Abi(0xC000003E, {"mmap": 9, "shmget": 29, "clone": 56, "unshare": 272,
                               "memfd_create": 319, "clone3": 435, "memfd_secret": 447,
                               "add_key": 248, "request_key": 249, "keyctl": 250,
                               "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
                               **_IO_URING},
                  foreign_bit=_X32),
    "aarch64": Abi(0xC00000B7, {"mmap": 222, "shmget": 194, "clone": 220, "unshare": 97,
                                "memfd_create": 279, "clone3": 435, "memfd_secret": 447,
                                "add_key": 217, "request_key": 218, "keyctl": 219,
                                "perf_event_open": 241, "bpf": 280, "userfaultfd": 282,
                                **_IO_URING}),
}


def refuse(code: int) -> int:
    """Return the verdict that fails a call with `code` (an errno)."""
    return _ERRNO | code


def program(machine: str, memory: bool) -> list[tuple[int, int, int, int]]:
    """Return the filter's instructions (code, jt, jf, k) for `machine`; KeyError if unknown."""
    abi = ABIS[machine]
    n = abi.numbers
    # The architecture first: another ABI's numbers mean other calls.
    out: list[tuple[int, int, int, int]] = []
    out.append((_LD_ABS, 0, 0, _ARCH))
    out.append((_JEQ, 1, 0, abi.arch))
    out.append((_RET, 0, 0, refuse(errno.ENOSYS)))
    out.append((_LD_ABS, 0, 0, _NR))
    if abi.foreign_bit:
        out.append((_JGE, 0, 1, abi.foreign_bit))
        out.append((_RET, 0, 0, refuse(errno.ENOSYS)))
    plain = {n["clone3"]: refuse(errno.ENOSYS),
             **{n[name]: refuse(code) for name, code in REFUSED.items()}}
    if memory:
        plain |= dict.fromkeys((n["memfd_create"], n["memfd_secret"], n["shmget"]),
                               refuse(errno.EPERM))
    for number, verdict in plain.items():
        out.append((_JEQ, 0, 1, number))
        out.append((_RET, 0, 0, verdict))
    checks = [(n["unshare"], _flags_block(0, CLONE_NEW)), (n["clone"], _flags_block(0, CLONE_NEW))]
    if memory:
        checks.append((n["mmap"], _all_flags_block(3, MAP_SHARED | MAP_ANONYMOUS)))
    # One jump per checked call, then ALLOW, then the calls' blocks in the same order.
    block = len(out) + len(checks) + 1
    for number, instructions in checks:
        out.append((_JEQ, block - len(out) - 1, 0, number))
        block += len(instructions)
    out.append((_RET, 0, 0, ALLOW))
    for _, instructions in checks:
        out.extend(instructions)
    return out


def _flags_block(arg: int, mask: int) -> list[tuple[int, int, int, int]]:
    """Refuse (EPERM) when argument `arg` has any bit of `mask`, else allow."""
    return [(_LD_ABS, 0, 0, _ARGS + 8 * arg), (_JSET, 0, 1, mask),
            (_RET, 0, 0, refuse(errno.EPERM)), (_RET, 0, 0, ALLOW)]


def _all_flags_block(arg: int, mask: int) -> list[tuple[int, int, int, int]]:
    """Refuse (EPERM) when argument `arg` has every bit of `mask`, else allow."""
    return [(_LD_ABS, 0, 0, _ARGS + 8 * arg), (_AND, 0, 0, mask), (_JEQ, 0, 1, mask),
            (_RET, 0, 0, refuse(errno.EPERM)), (_RET, 0, 0, ALLOW)]


def compiled(machine: str, memory: bool) -> bytes:
    """Return the filter as the array of `struct sock_filter` bubblewrap reads."""
    return b"".join(struct.pack("=HBBI", *insn) for insn in program(machine, memory))


def filter_file(folder: Path, memory: bool) -> Path | None:
    """Write this machine's filter into `folder` (once per content); None on another machine.

    The folder is the server's private one, never bound into a box: a box cannot change
    the filter its next start loads.
    """
    machine = platform.machine()
    if machine not in ABIS:
        return None
    data = compiled(machine, memory)
    path = folder / f"seccomp-{hashlib.sha256(data).hexdigest()[:12]}.bpf"
    if not path.exists():
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(data)
        partial.chmod(0o600)
        partial.replace(path)
    return path
