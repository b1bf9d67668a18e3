"""A small seccomp filter for commands: the kernel interfaces a sandboxed command never needs.

The namespaces and the dropped capabilities are the boundary; this only narrows the kernel's
attack surface, the way Flatpak's filter does: no new user namespaces (each would be a fresh
set of capabilities to attack the kernel with; `unshare` and `clone` with CLONE_NEWUSER
refused, `clone3` answered ENOSYS so libc falls back to `clone`), no mounts, no keyrings (not
namespaced), no eBPF, perf events, userfaultfd or io_uring, no module loading, kexec, reboot,
swap or accounting, and no TIOCSTI/TIOCLINUX (typing into a terminal; `--new-session` already
detaches it). Everything else is allowed. x86_64 only: on another architecture the filter is
left out (`filter_program` returns None) and the run says so in its record; a 32-bit or x32
system call on x86_64 is refused, since its numbers would miss the list.

The program is classic BPF, as `bwrap --seccomp FD` reads it: an array of sock_filter.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["filter_program"]

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_CLONE_NEWUSER = 0x10000000
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C

# Classic BPF opcodes.
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000

# seccomp_data: nr (u32) at 0, arch (u32) at 4, ip (u64) at 8, args (u64 x 6) from 16.
_NR, _ARCH, _ARG0_LO, _ARG1_LO = 0, 4, 16, 24

# x86_64 system call numbers refused with EPERM.
_DENIED_X86_64: dict[str, int] = {
    "syslog": 103,
    "acct": 163,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "pivot_root": 155,
    "vhangup": 153,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "setns": 308,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}
_CLONE = 56
_CLONE3 = 435
_IOCTL = 16


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _ret(value: int) -> bytes:
    return _op(_RET_K, value)


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture, or None where there is none."""
    if (machine or platform.machine()) not in ("x86_64", "amd64", "AMD64"):
        return None
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    prog = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ_K, _AUDIT_ARCH_X86_64, jt=1),  # native: go on; else refuse the call
        _ret(enosys),
        _op(_LD_W_ABS, _NR),
        _op(_JGE_K, _X32_BIT, jf=1),
        _ret(enosys),
    ]
    for number in sorted(_DENIED_X86_64.values()):
        prog += [_op(_JEQ_K, number, jf=1), _ret(eperm)]
    prog += [_op(_JEQ_K, _CLONE3, jf=1), _ret(enosys)]
    # clone: refuse CLONE_NEWUSER in its flags (arg 0, low word).
    prog += [
        _op(_JEQ_K, _CLONE, jf=3),
        _op(_LD_W_ABS, _ARG0_LO),
        _op(_JSET_K, _CLONE_NEWUSER, jf=1),
        _ret(eperm),
    ]
    # After the clone block the accumulator may hold arg 0: reload the number.
    prog += [_op(_LD_W_ABS, _NR)]
    # ioctl: refuse TIOCSTI and TIOCLINUX (arg 1, low word).
    prog += [
        _op(_JEQ_K, _IOCTL, jf=4),
        _op(_LD_W_ABS, _ARG1_LO),
        _op(_JEQ_K, _TIOCSTI, jt=1),
        _op(_JEQ_K, _TIOCLINUX, jf=1),
        _ret(eperm),
    ]
    prog += [_ret(_ALLOW)]
    return b"".join(prog)
