"""One thread of another process frozen for real: a thread that cannot stop, with no mock.

A thread blocked for good (in a system call that never returns, on a lock nobody releases) is
what a stop must survive. Linux can make exactly that of any chosen thread: ptrace's
``PTRACE_SEIZE`` then ``PTRACE_INTERRUPT`` stop that one thread (signals stop whole processes),
and it stays stopped while the tracer lives; the rest of the process runs on. The tracer is a
small child process (this file run as a script), because ptrace requests must come from the
thread that seized, and because a tracer that exits lets its thread go: the test ends it, and
it ends by itself after LIFE_S or once the frozen thread has exited.

The thread is found by its Python name with ``py-spy dump --json`` (bpmon's own dependency): only
a thread waiting with the GIL released is frozen, or the whole interpreter would stop with it, so
the caller checks that the process still answers and tries again otherwise.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000
"""``__WALL``: wait for a traced thread that is not the tracer's child process."""
LIFE_S = 120
"""The longest the tracer keeps a thread frozen."""
FROZEN = "frozen"


def thread_ids(pid: int, name: str) -> list[int]:
    """The OS ids of process ``pid``'s threads whose Python name is ``name``."""
    from bpmon.collectors.pyspy.dumps import find_py_spy

    dump = subprocess.run(
        [str(find_py_spy()), "dump", "--pid", str(pid), "--json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    threads = [t for p in json.loads(dump.stdout) for t in _threads(p)]
    return [t["os_thread_id"] for t in threads if t.get("thread_name") == name]


def _threads(entry: dict[str, object]) -> list[dict[str, object]]:
    """py-spy prints threads (one process) or processes holding threads (--subprocesses)."""
    inner = entry.get("threads")
    return inner if isinstance(inner, list) else [entry]


@contextmanager
def frozen(tid: int) -> Iterator[subprocess.Popen[str]]:
    """Thread ``tid`` stopped until the block ends (or its process exits)."""
    tracer = subprocess.Popen(
        [sys.executable, __file__, str(tid)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert tracer.stdout is not None
        said = tracer.stdout.readline().strip()
        if said != FROZEN:
            raise RuntimeError(f"could not freeze thread {tid}: {said or 'the tracer died'}")
        yield tracer
    finally:
        if tracer.poll() is None:
            tracer.kill()
        tracer.wait(timeout=30)
        if tracer.stdout is not None:
            tracer.stdout.close()


def _freeze(tid: int) -> None:
    """The tracer: seize and stop thread ``tid``, say so, then reap it when it exits."""
    signal.alarm(LIFE_S)  # never outlive a test
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    for request in (PTRACE_SEIZE, PTRACE_INTERRUPT):
        if libc.ptrace(request, tid, None, None) != 0:
            print(f"ptrace: {os.strerror(ctypes.get_errno())}", flush=True)
            sys.exit(1)
    os.waitpid(tid, WALL)  # the thread is in its ptrace stop now
    print(FROZEN, flush=True)
    while True:  # the process exits: the thread is killed and must be reaped here
        try:
            _, status = os.waitpid(tid, WALL)
        except ChildProcessError:
            return
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            return
        # stopped again (a signal it was to take): leave it where it is, frozen


if __name__ == "__main__":
    _freeze(int(sys.argv[1]))
