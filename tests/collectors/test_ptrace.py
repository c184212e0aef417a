"""Why ptrace was refused: the context read from a procfs tree, and one line per real cause.

The decision is a pure function of what the kernel exposes (our uid, ``CapEff``, the target's
uids, Yama's ``ptrace_scope``), so each case is driven by writing those files into a folder that
stands for ``/proc``; nothing is mocked. A root user is never told to "run as root".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bpmon.collectors.pyspy.dumps import py_spy_reason
from bpmon.collectors.pyspy.ptrace import PtraceContext, ptrace_denied_message, read_ptrace_context

ALL_CAPS = "000001ffffffffff"
NO_PTRACE = f"{int(ALL_CAPS, 16) & ~(1 << 19):016x}"  # a container's root: CAP_SYS_PTRACE dropped
NO_CAPS = "0000000000000000"


def fake_proc(
    root: Path,
    *,
    cap_eff: str,
    target_uid: int = 1000,
    scope: int | None = None,
    cap_bnd: str = NO_PTRACE,
) -> Path:
    """A procfs tree with ``self/status``, ``4242/status`` and, when given, Yama's setting."""
    (root / "self").mkdir(parents=True)
    (root / "self" / "status").write_text(
        f"Name:\tbpmon\nCapInh:\t{NO_CAPS}\nCapEff:\t{cap_eff}\nCapBnd:\t{cap_bnd}\n"
    )
    (root / "4242").mkdir()
    uid = target_uid
    (root / "4242" / "status").write_text(f"Name:\tpython3\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    if scope is not None:
        yama = root / "sys" / "kernel" / "yama"
        yama.mkdir(parents=True)
        (yama / "ptrace_scope").write_text(f"{scope}\n")
    return root


def message(
    tmp_path: Path,
    euid: int,
    *,
    cap_eff: str,
    target_uid: int = 1000,
    scope: int | None = None,
    cap_bnd: str = NO_PTRACE,
) -> str:
    """The message bpmon (as ``euid``) gives for PID 4242 under that procfs."""
    proc = fake_proc(tmp_path, cap_eff=cap_eff, target_uid=target_uid, scope=scope, cap_bnd=cap_bnd)
    ctx = read_ptrace_context(4242, proc=proc, euid=euid)
    text = ptrace_denied_message(ctx)
    assert "\n" not in text and text.startswith("not allowed to read PID 4242 (ptrace denied: ")
    return text


def test_the_context_is_read_from_procfs(tmp_path: Path) -> None:
    ctx = read_ptrace_context(
        4242, proc=fake_proc(tmp_path, cap_eff=NO_PTRACE, target_uid=33, scope=1), euid=0
    )
    assert ctx == PtraceContext(4242, 0, (33, 33, 33), 1, cap_sys_ptrace=False, cap_bounded=False)
    assert read_ptrace_context(4242, proc=tmp_path / "absent", euid=5) == PtraceContext(4242, 5)


def test_capability_bit_19_is_what_counts(tmp_path: Path) -> None:
    only_ptrace = f"{1 << 19:016x}"
    ctx = read_ptrace_context(1, proc=fake_proc(tmp_path, cap_eff=only_ptrace), euid=1000)
    assert ctx.cap_sys_ptrace is True


def test_root_in_a_container_without_the_capability_is_told_to_add_it(tmp_path: Path) -> None:
    text = message(tmp_path, 0, cap_eff=NO_PTRACE, target_uid=0, scope=1)
    assert "runs as root but without the CAP_SYS_PTRACE capability" in text
    assert "--cap-add SYS_PTRACE" in text
    assert "run bpmon as root" not in text and "sudo" not in text


def test_scope_3_is_named_as_forbidding_even_root(tmp_path: Path) -> None:
    text = message(tmp_path, 0, cap_eff=ALL_CAPS, scope=3)
    assert "kernel.yama.ptrace_scope = 3" in text and "root included" in text
    assert "reboot" in text and "run bpmon as root" not in text


def test_root_with_the_capability_points_at_the_security_policy(tmp_path: Path) -> None:
    text = message(tmp_path, 0, cap_eff=ALL_CAPS, scope=1)
    assert "holds CAP_SYS_PTRACE" in text and "seccomp" in text
    assert "run bpmon as root" not in text


def test_another_users_process_names_both_users(tmp_path: Path) -> None:
    text = message(tmp_path, 1000, cap_eff=NO_CAPS, target_uid=0, scope=0)
    assert "PID 4242 belongs to uid 0 and bpmon runs as uid 1000" in text
    assert "run bpmon as root (sudo)" in text
    other = message(tmp_path / "2", 1000, cap_eff=NO_CAPS, target_uid=33, scope=0)
    assert "run bpmon as uid 33 or as root (sudo)" in other


def test_scope_1_on_ones_own_process_says_only_children_may_be_read(tmp_path: Path) -> None:
    text = message(tmp_path, 1000, cap_eff=NO_CAPS, target_uid=1000, scope=1)
    assert "ptrace_scope = 1 lets a user read only its own child processes" in text
    assert "sysctl kernel.yama.ptrace_scope=0" in text


def test_scope_2_requires_the_capability(tmp_path: Path) -> None:
    text = message(tmp_path, 1000, cap_eff=NO_CAPS, target_uid=1000, scope=2)
    assert "only holders of CAP_SYS_PTRACE" in text and "setcap cap_sys_ptrace+ep" in text
    assert "ptrace_scope=0" not in text  # lowering to 0 is not the fix named for scope 2


@pytest.mark.parametrize("scope", [None, 0])
def test_own_process_without_yama_restrictions_suspects_the_target(
    tmp_path: Path, scope: int | None
) -> None:
    text = message(tmp_path, 1000, cap_eff=NO_CAPS, target_uid=1000, scope=scope)
    assert "is yours but refuses to be read" in text and "non-dumpable" in text


def test_a_custom_py_spy_command_is_named_as_the_one_refused() -> None:
    ctx = PtraceContext(7, 0, (0, 0, 0), 1, True, command=("sudo", "-n", "py-spy"))
    text = ptrace_denied_message(ctx)
    assert "py-spy ran as `sudo -n py-spy`" in text and "kernel.yama.ptrace_scope = 1" in text


def test_a_user_in_a_container_given_the_capability_learns_it_reaches_root_only(
    tmp_path: Path,
) -> None:
    # docker run --cap-add SYS_PTRACE --user 1000: the capability is bounded, not effective
    text = message(tmp_path, 1000, cap_eff=NO_CAPS, target_uid=1000, scope=1, cap_bnd=ALL_CAPS)
    assert "reaches root only, not uid 1000" in text
    plain = message(tmp_path / "2", 1000, cap_eff=NO_CAPS, target_uid=1000, scope=1)
    assert "reaches root only" not in plain


PY_SPY_EXE_DENIED = (
    "Error: Failed to get process executable name. Check that the process is running.\n\n"
    "Caused by:\n    0: Permission denied (os error 13)\n    1: Permission denied (os error 13)\n"
)
"""What py-spy 0.4 printed for `py-spy dump --pid 1` as root in a container (its own stderr)."""


def test_py_spy_s_own_reason_is_reported_before_the_likely_cause(tmp_path: Path) -> None:
    said = py_spy_reason(PY_SPY_EXE_DENIED)
    assert said == "Failed to get process executable name: Permission denied (os error 13)"
    proc = fake_proc(tmp_path, cap_eff=ALL_CAPS)
    text = ptrace_denied_message(read_ptrace_context(4242, proc=proc, euid=0), said)
    assert text.startswith(
        "not allowed to read PID 4242: py-spy said 'Failed to get process executable name: "
        "Permission denied (os error 13)' (ptrace denied: "
    )
    assert "likely a security module" in text and "\n" not in text
