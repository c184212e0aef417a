"""Why the kernel refused py-spy ptrace access to a process, said as one line with its fix.

py-spy reads another process's memory (``process_vm_readv``), which the kernel allows under the
same rules as ``ptrace`` attach. A refusal has several causes, and each has a different fix:

- Yama's ``kernel.yama.ptrace_scope``: 0 classic (same user, or ``CAP_SYS_PTRACE``), 1 only a
  parent may trace its descendants (or ``CAP_SYS_PTRACE``), 2 only with ``CAP_SYS_PTRACE``, 3 no
  one at all, root included, until a reboot;
- root without ``CAP_SYS_PTRACE`` (a container drops it unless started with ``--cap-add
  SYS_PTRACE``): root is not enough, the capability is what counts;
- a process of another user, when bpmon has no capability;
- a capability that is there, yet a security module (AppArmor, SELinux) or a seccomp filter
  refuses the call;
- a py-spy started through a custom command (``sudo -n py-spy``, ``setpriv ...``), whose rights
  are not bpmon's own.

:func:`read_ptrace_context` reads what decides (the effective uid, ``CapEff`` bit 19 of
``/proc/self/status``, the target's uids, the Yama setting) from an injectable procfs root;
:func:`ptrace_denied_message` is a pure function of it, so every case is testable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CAP_SYS_PTRACE = 19
"""The bit of ``CAP_SYS_PTRACE`` in a capability mask (``linux/capability.h``)."""

_SETCAP = "sudo setcap cap_sys_ptrace+ep $(which py-spy)"


@dataclass(frozen=True, slots=True)
class PtraceContext:
    """What decides whether bpmon's py-spy may read a process (None: could not be read).

    Attributes:
        pid: the target process.
        euid: bpmon's effective user id.
        target_uids: the target's real, effective and saved user ids.
        ptrace_scope: ``kernel.yama.ptrace_scope`` (None: no Yama, or unreadable).
        cap_sys_ptrace: whether bpmon's effective capabilities hold ``CAP_SYS_PTRACE``.
        cap_bounded: whether its bounding set holds it (it could have it: a container started
            with ``--cap-add SYS_PTRACE`` gives it to root only, not to another user).
        command: the custom command py-spy was started with, if any.
    """

    pid: int
    euid: int
    target_uids: tuple[int, ...] | None = None
    ptrace_scope: int | None = None
    cap_sys_ptrace: bool | None = None
    cap_bounded: bool | None = None
    command: tuple[str, ...] | None = None


def read_ptrace_context(
    pid: int,
    *,
    proc: Path = Path("/proc"),
    euid: int | None = None,
    command: Sequence[str] | None = None,
) -> PtraceContext:
    """Read the context of a refusal from ``proc`` (``/proc``); ``euid`` defaults to ours."""
    scope = _read(proc / "sys" / "kernel" / "yama" / "ptrace_scope")
    status = _read(proc / "self" / "status")
    return PtraceContext(
        pid=pid,
        euid=os.geteuid() if euid is None else euid,
        target_uids=_uids(_read(proc / str(pid) / "status")),
        ptrace_scope=int(scope) if scope is not None and scope.strip().isdigit() else None,
        cap_sys_ptrace=_has_capability(status, "CapEff", CAP_SYS_PTRACE),
        cap_bounded=_has_capability(status, "CapBnd", CAP_SYS_PTRACE),
        command=tuple(command) if command is not None else None,
    )


def ptrace_denied_message(ctx: PtraceContext, said: str | None = None) -> str:
    """One line: the PID, what was denied (in py-spy's own words when ``said`` gives them:
    reading the executable's link is refused by the same check as ptrace) and why, then the fix
    for that very cause."""
    cause, fix = _cause_and_fix(ctx)
    own = f": py-spy said {said!r}" if said else ""
    return f"not allowed to read PID {ctx.pid}{own} (ptrace denied: {cause}); {fix}"


def _cause_and_fix(ctx: PtraceContext) -> tuple[str, str]:
    scope = ctx.ptrace_scope
    note = "" if scope is None else f", kernel.yama.ptrace_scope = {scope}"
    if scope is not None and scope >= 3:
        return (
            "kernel.yama.ptrace_scope = 3 forbids it to every process, root included",
            "set kernel.yama.ptrace_scope to 2 or lower in /etc/sysctl.d and reboot "
            "(3 cannot be lowered while the system runs)",
        )
    if ctx.command is not None:
        return (
            f"py-spy ran as `{' '.join(ctx.command)}`, with that command's rights{note}",
            f"run that command as root, or grant py-spy CAP_SYS_PTRACE with {_SETCAP}",
        )
    if ctx.cap_sys_ptrace:
        return (
            f"bpmon holds CAP_SYS_PTRACE{note}, so what refused is likely a security module "
            "(AppArmor, SELinux) or a seccomp filter",
            "allow ptrace for bpmon in that policy (in a container: docker run --security-opt "
            "seccomp=unconfined, or apparmor=unconfined)",
        )
    if ctx.euid == 0:
        which = "without" if ctx.cap_sys_ptrace is False else "perhaps without"
        return (
            f"bpmon runs as root but {which} the CAP_SYS_PTRACE capability, as in a container "
            f"that drops it{note}",
            "start the container with --cap-add SYS_PTRACE (root alone is not enough), or run "
            "bpmon where root keeps its capabilities",
        )
    return _unprivileged(ctx, note)


def _unprivileged(ctx: PtraceContext, note: str) -> tuple[str, str]:
    """The causes for a user without CAP_SYS_PTRACE."""
    grant = f"grant py-spy CAP_SYS_PTRACE with {_SETCAP}"
    cause, fix = _unprivileged_cause(ctx, note, grant)
    if ctx.cap_bounded:  # e.g. docker run --cap-add SYS_PTRACE --user 1000
        cause += f"; a capability added to a container reaches root only, not uid {ctx.euid}"
    return cause, fix


def _unprivileged_cause(ctx: PtraceContext, note: str, grant: str) -> tuple[str, str]:
    """Yama's scope 2, another user's process, Yama's scope 1, else the target itself."""
    if ctx.ptrace_scope == 2:
        return (
            f"kernel.yama.ptrace_scope = 2 lets only holders of CAP_SYS_PTRACE read a process, "
            f"and bpmon (uid {ctx.euid}) has not got it",
            f"run bpmon as root (sudo), or {grant}",
        )
    uids = ctx.target_uids
    if uids and any(uid != ctx.euid for uid in uids):
        owner = "root (sudo)" if uids[0] == 0 else f"uid {uids[0]} or as root (sudo)"
        return (
            f"PID {ctx.pid} belongs to uid {uids[0]} and bpmon runs as uid {ctx.euid} without "
            f"CAP_SYS_PTRACE{note}",
            f"run bpmon as {owner}, or {grant}",
        )
    if ctx.ptrace_scope == 1:
        return (
            f"kernel.yama.ptrace_scope = 1 lets a user read only its own child processes, and "
            f"PID {ctx.pid} is not bpmon's child",
            f"run bpmon with sudo, or {grant}, or allow it for your own processes: "
            "sudo sysctl kernel.yama.ptrace_scope=0",
        )
    return (
        f"PID {ctx.pid} is yours but refuses to be read{note}: it may be non-dumpable "
        "(setuid, or prctl PR_SET_DUMPABLE 0) or a seccomp filter blocks the call",
        f"run bpmon as root (sudo), or {grant}",
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _status_field(status: str | None, key: str) -> list[str] | None:
    for line in (status or "").splitlines():
        name, sep, value = line.partition(":")
        if sep and name == key:
            return value.split()
    return None


def _uids(status: str | None) -> tuple[int, ...] | None:
    """The real, effective and saved uids of a ``/proc/PID/status`` text."""
    values = _status_field(status, "Uid")
    if not values or not all(v.isdigit() for v in values[:3]):
        return None
    return tuple(int(v) for v in values[:3])


def _has_capability(status: str | None, field: str, bit: int) -> bool | None:
    """Whether capability set ``field`` (``CapEff``) of a ``/proc/PID/status`` holds ``bit``."""
    values = _status_field(status, field)
    if not values:
        return None
    try:
        return bool(int(values[0], 16) >> bit & 1)
    except ValueError:
        return None
