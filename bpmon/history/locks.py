"""The history's two locks: one compactor at a time, and no deletion under a reader's feet.

Both are ``flock`` locks on empty files in the dataset's root, so they vanish with the process
that held them (a killed compactor never leaves the dataset locked):

- ``.compaction.lock``: held exclusively by whoever compacts, prunes or removes leftovers, so
  two compactions never merge the same parts into two different parts;
- ``.readers.lock``: held shared by bpmon's readers from the moment they list the parts until
  they have read them (``bpmon analyze`` holds it while Spark runs), and exclusively, never
  waiting, by whoever deletes parts: while someone reads, the parts replaced by a compacted one
  are left for the next compaction (readers skip them anyway).

Appends take no lock: they only add files, which no reader or compactor can mistake.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

COMPACTION_LOCK = ".compaction.lock"
READERS_LOCK = ".readers.lock"
LOCK_FILES = (COMPACTION_LOCK, READERS_LOCK)
"""The lock files' names in the dataset's root (not parts, not strays)."""

POLL_S = 0.05


@contextlib.contextmanager
def held(path: Path, *, shared: bool = False, wait_s: float = 0.0) -> Iterator[bool]:
    """Hold the lock ``path``; yields whether it was taken within ``wait_s`` seconds.

    A lock file that cannot be created (a read-only dataset) yields False at once, as does a
    lock still taken by another holder after ``wait_s`` (0: do not wait).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    try:
        yield _take(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX, wait_s)
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _take(fd: int, kind: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
        except OSError:  # a file system without flock: proceed unlocked
            return False
        else:
            return True
