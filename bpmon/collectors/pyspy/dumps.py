"""Stack bursts of ANOTHER Python process, read with the real ``py-spy`` binary.

Why one ``py-spy dump --json`` per sample (and not ``py-spy record``): a burst needs, per sample,
every thread's stack read at the same instant, with thread NAMES (to map threads to subtasks), on
a regular 50 ms grid. ``py-spy dump --json`` gives exactly one such snapshot (``thread_name`` and
frames per thread) and returns in ~12 ms. ``py-spy record --format raw|speedscope --threads
--idle`` also carries thread names (py-spy 0.4), but it spaces its samples with random
exponential intervals on purpose (to avoid aliasing, py-spy issue #94), takes whole seconds of
duration and aggregates stacks, so neither the sample count nor the 50 ms spacing is Flink's.
Each dump is a separate py-spy process started on this module's absolute schedule; the time a
dump takes to attach is a constant offset, and its variation is reported as jitter.

The target is never paused unless asked (``--nonblocking``): reading a running process can very
rarely give a torn stack, which is classified as read; a dump that fails is a missed sample.
Every failure a user can meet is one line with the fix: no such process, permission denied
(ptrace: what exactly was denied, :mod:`bpmon.collectors.pyspy.ptrace`), not a Python process,
py-spy missing, py-spy hanging (every call has a timeout).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from bpmon.collectors.profile import Profile, StackClassifier
from bpmon.collectors.pyspy.ptrace import ptrace_denied_message, read_ptrace_context
from bpmon.collectors.sampler import (
    Progress,
    Snapshot,
    StackBurst,
    StopSignal,
    ThreadState,
    record_burst,
)
from bpmon.model.clock import utc_now
from bpmon.model.errors import CollectorError, PermissionDeniedError, TargetNotFoundError

DEFAULT_TIMEOUT_S = 5.0


def find_py_spy() -> Path:
    """The ``py-spy`` executable: next to this Python (the venv's ``bin/``), else on ``PATH``.

    Raises:
        CollectorError: py-spy is not installed.
    """
    beside = Path(sys.executable).parent / ("py-spy.exe" if os.name == "nt" else "py-spy")
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("py-spy")
    if found:
        return Path(found)
    raise CollectorError(
        f"py-spy is not installed (looked in {beside.parent} and on PATH); "
        f"install it with `{sys.executable} -m pip install py-spy`"
    )


class PySpySampler:
    """Samples every thread of process ``pid`` with py-spy, classified with ``profile``.

    Args:
        pid: the process to watch.
        profile: what a stack means (for example ``python-queue``).
        pause: pause the target while each sample is read (py-spy's default, exact but
            intrusive); by default it is read while it runs.
        command: how to start py-spy, for example ``["sudo", "-n", "py-spy"]``; default: the
            binary :func:`find_py_spy` finds.
        timeout_s: the longest one py-spy call may take before it is killed.
        proc: the procfs root, to tell a vanished process from other failures and say why
            ptrace was refused.
    """

    def __init__(
        self,
        pid: int,
        profile: Profile,
        *,
        pause: bool = False,
        command: Sequence[str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wall_clock: Callable[[], datetime] = utc_now,
        proc: Path = Path("/proc"),
    ) -> None:
        """Prepare to watch ``pid``; nothing is started until :meth:`dump` or :meth:`burst`."""
        self.pid = pid
        self.profile = profile
        self._pause = pause
        self._command = tuple(command) if command is not None else None
        self._timeout_s = timeout_s
        self._clock = clock
        self._sleep = sleep
        self._wall_clock = wall_clock
        self._proc = proc
        self._classifier = StackClassifier(profile)
        self._ignored: dict[str, bool] = {}

    def burst(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> StackBurst:
        """Take ``samples`` samples of every thread ``interval_ms`` apart.

        One dump before the first deadline checks the target and warms py-spy up; it is not
        counted.

        Raises:
            TargetNotFoundError: the process does not exist or exited during the burst.
            PermissionDeniedError: ptrace access to the process is refused.
            CollectorError: not a Python process, py-spy missing or hanging, or more than half of
                the samples could not be read.
        """
        self._check_alive()
        self._first_dump()
        failures: list[CollectorError] = []

        def take() -> Snapshot | None:
            try:
                return self.sample()
            except _UnreadableSampleError as err:
                failures.append(err)
                return None

        burst = record_burst(
            take,
            samples,
            interval_ms,
            clock=self._clock,
            sleep=self._sleep,
            wall_clock=self._wall_clock,
            progress=progress,
            stop=stop,
        )
        if failures and len(failures) * 2 > burst.samples + burst.missed:
            raise CollectorError(
                f"py-spy could read only {burst.samples} of {burst.samples + burst.missed} "
                f"samples of PID {self.pid} ({failures[-1]}); retry, or pass pause=True "
                "(--pause) to read a stopped target"
            )
        return burst

    def _first_dump(self, attempts: int = 3) -> None:
        """Fail before the schedule starts (not Python, ptrace, py-spy missing).

        A torn read of a busy target is transient: retried, as the samples of a burst are.
        """
        for attempt in range(attempts):
            try:
                self.dump()
                return
            except _UnreadableSampleError:
                if attempt == attempts - 1:
                    raise
                self._sleep(0.05)

    def sample(self) -> Snapshot:
        """One sample now: every thread's state, read by one ``py-spy dump``."""
        threads = self.dump()
        return Snapshot(self._clock(), threads)

    def dump(self) -> list[ThreadState]:
        """Run ``py-spy dump --json`` once and classify every thread the profile keeps.

        Raises:
            TargetNotFoundError, PermissionDeniedError, CollectorError: see :meth:`burst`.
        """
        argv = [*self._py_spy(), "dump", "--pid", str(self.pid), "--json"]
        if not self._pause:
            argv.append("--nonblocking")
        out = self._run(argv)
        try:
            traces = json.loads(out)
            return [self._classify(trace) for trace in traces if self._keeps(trace)]
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise _UnreadableSampleError(
                f"py-spy printed output bpmon cannot read for PID {self.pid} ({err}); "
                "use py-spy 0.3.14 or later"
            ) from None

    def _py_spy(self) -> tuple[str, ...]:
        if self._command is not None:
            return self._command
        return (str(find_py_spy()),)

    def _run(self, argv: list[str]) -> str:
        env = {**os.environ, "RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"}
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=self._timeout_s, env=env, check=False
            )
        except FileNotFoundError:
            raise CollectorError(
                f"py-spy is not installed: {argv[0]!r} was not found; install it with "
                f"`{sys.executable} -m pip install py-spy`"
            ) from None
        except PermissionError:
            raise CollectorError(f"{argv[0]!r} is not executable; reinstall py-spy") from None
        except subprocess.TimeoutExpired:
            raise CollectorError(
                f"py-spy did not answer within {self._timeout_s:g} s for PID {self.pid}: the "
                "process may be stopped (SIGSTOP) or the machine overloaded; try again"
            ) from None
        if done.returncode != 0:
            raise self._failure(done.stderr)
        return done.stdout

    def _failure(self, stderr: str) -> CollectorError:
        """Tell from py-spy's stderr and /proc why a dump failed, as a one-line error."""
        text = stderr.lower()
        if not self._alive():
            return process_not_found(self.pid)
        if "permission denied" in text or "operation not permitted" in text:
            context = read_ptrace_context(self.pid, proc=self._proc, command=self._command)
            return PermissionDeniedError(ptrace_denied_message(context, py_spy_reason(stderr)))
        if "failed to find python version" in text or "failed to find a python interpreter" in text:
            return CollectorError(
                f"PID {self.pid} ({self._comm()}) is not a Python process (py-spy found no "
                "interpreter in it); pass the PID of the Python program to watch"
            )
        first = next((line.strip() for line in stderr.splitlines() if line.strip()), "no output")
        return _UnreadableSampleError(
            f"py-spy could not read PID {self.pid}: {first} (upgrade py-spy if the target runs a "
            "newer Python than it supports)"
        )

    def _keeps(self, trace: dict[str, object]) -> bool:
        name = _thread_name(trace)
        ignored = self._ignored.get(name)
        if ignored is None:
            ignored = self._ignored[name] = self.profile.ignores(name)
        return not ignored

    def _classify(self, trace: dict[str, object]) -> ThreadState:
        frames, ident = trace["frames"], trace["thread_id"]
        if not isinstance(frames, list) or not isinstance(ident, int):
            raise TypeError(f"unexpected thread entry {str(trace)[:80]}")
        texts = [f"{frame['filename']}:{frame['name']}" for frame in frames]
        return (ident, _thread_name(trace), *self._classifier.read(texts))

    def _check_alive(self) -> None:
        if self.pid <= 0 or not self._alive():
            raise process_not_found(self.pid)

    def _alive(self) -> bool:
        try:
            state = (self._proc / str(self.pid) / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return False
        return state[0] not in ("Z", "X")  # a zombie has exited already

    def _comm(self) -> str:
        try:
            return (self._proc / str(self.pid) / "comm").read_text().strip() or "?"
        except OSError:
            return "?"


class _UnreadableSampleError(CollectorError):
    """One dump failed for a reason a later sample may not meet (a torn read): a missed sample."""


def process_not_found(pid: int) -> TargetNotFoundError:
    """The error of a PID with no process behind it, naming how to check it."""
    return TargetNotFoundError(
        f"no process with PID {pid} (it may have exited); check the PID with `ps -p {pid}`"
    )


def _thread_name(trace: dict[str, object]) -> str:
    name = trace.get("thread_name")
    if isinstance(name, str) and name:
        return name
    return f"thread-{trace.get('os_thread_id') or trace.get('thread_id')}"


def py_spy_reason(stderr: str) -> str:
    """py-spy's own words for a failure: its ``Error:`` line and the last ``Caused by`` reason
    (``Failed to get process executable name: Permission denied (os error 13)``)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    first = next((ln.removeprefix("Error:").strip() for ln in lines if ln.startswith("Error:")), "")
    first = first or (lines[0] if lines else "")
    first = first.split(". Check that")[0].rstrip(".")  # py-spy's generic advice, not a reason
    causes = [ln.split(":", 1)[1].strip() for ln in lines if ln[:1].isdigit() and ":" in ln]
    return f"{first}: {causes[-1]}" if causes else first
