"""A stop of ``bpmon serve`` that always ends: within FORCE_S of the first Ctrl-C or SIGTERM.

The normal stop (uvicorn closes its connections, every watch is stopped and joined) can wait on
threads the process cannot interrupt: a watch blocked in a system call, a lock that is never
released. So the first signal arms :func:`faulthandler.dump_traceback_later` with ``exit=True``:
a C thread that needs no GIL, and that, if the process is still there FORCE_S later, prints the
stack of every thread to stderr (what held the stop up) and exits with code 1. The normal stop
is given what is left of that time (:meth:`Stopping.left`), so it fits inside it and a clean stop
exits 0. A second signal does not wait: it prints the stacks and exits with code 1 at once.

The app stops its watches on a thread of its own (:func:`on_own_thread`), not on the thread
pool that serves requests: a request stuck on one of the pool's threads cannot keep the watches
from being stopped and their last reports saved.

The timer is armed only by a signal, never when the server is stopped from inside (the tests
stop servers running on a thread, in their own process). It cannot help a process whose GIL is
held forever (a deadlock inside the interpreter): no Python code runs there, not even the
signal handler that would arm it.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from types import FrameType
from typing import NoReturn, TextIO, TypeVar

from bpmon.service.watching import JOIN_TIMEOUT_S

T = TypeVar("T")

FORCE_S = 5.0
"""The longest a stop takes after the first signal, forced past it."""
MARGIN_S = 2.0
"""What the normal stop leaves of FORCE_S for the last steps: saying so, exiting the interpreter."""
FORCED_EXIT = 1
"""The exit code of a forced stop (faulthandler's own)."""
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopping:
    """The deadline of one server's stop, and the signal handling around it.

    Args:
        force_s: seconds from the first signal to the forced exit.
        say: writes one line for the user (stderr).
        stderr: where the stacks go when the exit is forced.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        force_s: float = FORCE_S,
        *,
        say: Callable[[str], None] | None = None,
        stderr: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.force_s = force_s
        self._stderr = stderr if stderr is not None else sys.stderr
        self._say = say if say is not None else self._print
        self._clock = clock
        self.since: float | None = None
        self.interrupting = False
        """While True (the watches are starting), the first signal also raises KeyboardInterrupt."""
        self._sink: TextIO | None = None

    @contextmanager
    def handling(self) -> Iterator[None]:
        """Ctrl-C and SIGTERM go to :meth:`on_signal` inside (uvicorn's handler, while it runs,
        calls :meth:`signalled` too: see :class:`bpmon.web.server.BpmonServer`).

        Once a stop has begun the handler stays, so that a second signal still forces the exit
        while the process ends (a thread that is not a daemon can hold the interpreter's exit).
        """
        previous = {sig: signal.signal(sig, self.on_signal) for sig in SIGNALS}
        try:
            yield
        finally:
            if self.since is None:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: time the stop, or force it; interrupt a start."""
        if self.signalled() and self.interrupting:
            raise KeyboardInterrupt

    def signalled(self) -> bool:
        """A Ctrl-C or SIGTERM arrived: True the first time (arm the timer), else force the exit."""
        if self.since is None:
            self.since = self._clock()
            self._arm()
            self._say(
                f"bpmon: stopping (at most {self.force_s:g} s; Ctrl-C or SIGTERM again to force)"
            )
            return True
        self.force("a second signal")

    def left(self) -> float:
        """Seconds the normal stop may still take: its share of FORCE_S (never negative) after
        a signal; JOIN_TIMEOUT_S when the server was stopped from inside (nothing is timed)."""
        if self.since is None:
            return JOIN_TIMEOUT_S
        return max(0.0, self.force_s - MARGIN_S - (self._clock() - self.since))

    def force(self, why: str) -> NoReturn:
        """Print every thread's stack and exit with FORCED_EXIT now, whatever the threads do."""
        self._say(f"bpmon: forced to exit by {why}; the stack of every thread follows")
        with contextlib.suppress(ValueError, OSError):  # no stderr: exit all the same
            faulthandler.dump_traceback(file=self._stderr, all_threads=True)
        os._exit(FORCED_EXIT)

    def _arm(self) -> None:
        try:
            faulthandler.dump_traceback_later(self.force_s, exit=True, file=self._stderr)
        except (ValueError, OSError):  # no usable stderr: exit on time without the stacks
            self._sink = open(os.devnull, "w")  # noqa: SIM115 (faulthandler keeps it open)
            faulthandler.dump_traceback_later(self.force_s, exit=True, file=self._sink)

    def _print(self, line: str) -> None:
        with contextlib.suppress(ValueError, OSError):  # stderr gone: the stop goes on
            print(line, file=self._stderr, flush=True)


async def on_own_thread(call: Callable[[], T]) -> T:
    """``call()`` on a new daemon thread, awaited without holding a thread of the shared pool."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def hand_over(settle: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(lambda: None if done.cancelled() else settle())

    def run() -> None:
        try:
            value = call()
        except BaseException as exc:  # raised in the awaiting task instead
            hand_over(partial(done.set_exception, exc))
        else:
            hand_over(partial(done.set_result, value))

    threading.Thread(target=run, name="bpmon-stop", daemon=True).start()
    return await done
