"""Files written whole or not at all: the one way bpmon writes a file a reader may open meanwhile.

The bytes go to a hidden temporary file beside the target (``.<name>.<random>.tmp``), are
synced, and the file is then renamed to its name and the folder synced. A reader sees the old
file or the new one, never half of one; a process killed on the way leaves at most the
temporary file, which the runs directory and the history dataset know by its name and skip.

An *exclusive* write links the temporary file to its name instead of renaming it: the link fails
if the name exists, so of two writers of the same file exactly one wins and the other's file is
left as it is. Where links are not supported, an existence check and a rename do the same,
without the guarantee against a concurrent writer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_NO_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV)


@contextlib.contextmanager
def atomic_write(target: Path, *, exclusive: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write ``target`` through; it takes the name when the block ends.

    An exception in the block leaves ``target`` as it was and removes the temporary file.

    Raises:
        FileExistsError: ``exclusive`` and ``target`` exists (nothing is written).
        OSError: the file cannot be written.
    """
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        if exclusive:
            _link(temp, target)
        else:
            os.replace(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    sync_folder(target.parent)


def _link(temp: str, target: Path) -> None:
    """Give ``temp`` the name ``target`` unless it exists (FileExistsError then)."""
    try:
        os.link(temp, target)
    except OSError as exc:  # FileExistsError (EEXIST) is not one of _NO_LINKS: raised as it is
        if exc.errno not in _NO_LINKS:
            raise
        if target.exists():
            raise FileExistsError(errno.EEXIST, "file exists", str(target)) from None
        os.replace(temp, target)


def sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: not every platform can sync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
