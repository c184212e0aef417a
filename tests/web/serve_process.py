"""The real ``bpmon serve`` as a child process: its URL (read from its announcement on stderr)
and its stderr lines. The web tests and the Flink chaos test start it here."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.waiting import WAIT_S

STOP_S = 15.0
"""How long a stopped server may take to exit before it is killed."""


class ServeProcess:
    """A running ``bpmon serve``: its process, its URL and its stderr lines so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.url = self._announced()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))

    def _announced(self) -> str:
        while True:
            try:
                line = self.lines.get(timeout=WAIT_S)
            except queue.Empty:
                raise AssertionError(f"bpmon serve announced no URL in {WAIT_S:g} s") from None
            self.seen.append(line)
            found = re.search(r"serving (https?://\S+)", line)
            if found:
                return found.group(1)

    def rest(self) -> list[str]:
        """Every stderr line so far."""
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return self.seen

    def finish(self) -> tuple[int, list[str]]:
        """Wait for the exit; the exit code and every stderr line."""
        code = self.process.wait(timeout=WAIT_S)
        while True:
            try:
                self.seen.append(self.lines.get(timeout=1))
            except queue.Empty:
                return code, self.seen


@contextmanager
def bpmon_serve(
    bpmon_bin: Path, *args: str, env: dict[str, str] | None = None, graceful: bool = False
) -> Iterator[ServeProcess]:
    """``bpmon serve --port 0 ARGS``; at the end, if still running, killed (``graceful``: sent
    SIGTERM as a service manager would, and killed only if it does not exit in time)."""
    process = subprocess.Popen(
        [str(bpmon_bin), "serve", "--port", "0", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    child: ServeProcess | None = None
    try:
        child = ServeProcess(process)
        yield child
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
            try:
                process.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
        process.wait(timeout=WAIT_S)
        if child is not None:
            child.reader.join(WAIT_S)
        assert process.stderr is not None
        process.stderr.close()
