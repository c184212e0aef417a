"""Spill files: where blocking and hybrid subpartitions keep buffers on a real disk.

One :class:`SpillFile` per subpartition, under the job's own temporary directory (the job creates
it and removes it when it ends, however it ends). Each buffer written is one frame: its records
(pickled, as a serializer would write them) after a small header, padded to at least the buffer's
byte size, so the file grows by what the buffer holds. An in-memory index (Flink keeps one per
region of buffers) says where each frame lies, so a buffer is read back by its position in the
subpartition, in any order the reader needs.

The file counts what it wrote and read and how long the disk took (``disk_s``); the metrics turn
those into bytes spilled and read per second and disk time, as the diagnosis of spilling needs.
Writes and reads happen under the network lock, as everything in the runtime does: one simulated
disk, serialised.

A buffer read back goes into read memory of its own (Flink reads blocking and spilled hybrid
data into the batch-shuffle read memory, not into network buffers): :class:`SpillReader` hands
it out as a :class:`~bpmon.runtime.buffers.Buffer` of :data:`READ_SEGMENT` and counts it until
the reader recycles it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bpmon.runtime.buffers import Buffer

HEADER = struct.Struct("<II")
"""A frame's header: the pickled records' length and the buffer's byte size."""


@dataclass(frozen=True, slots=True)
class SpillCounters:
    """What one or several spill files did so far: bytes written and read, seconds on disk."""

    written_bytes: int = 0
    read_bytes: int = 0
    disk_s: float = 0.0

    def __add__(self, other: SpillCounters) -> SpillCounters:
        return SpillCounters(
            self.written_bytes + other.written_bytes,
            self.read_bytes + other.read_bytes,
            self.disk_s + other.disk_s,
        )


class SpillFile:
    """The spilled buffers of one subpartition in one real file, indexed by buffer number.

    Args:
        path: the file to create (its directory must exist).
        clock: monotonic seconds, to measure disk time.
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.perf_counter) -> None:
        self.path = path
        self._clock = clock
        self._file = open(path, "w+b")  # noqa: SIM115 - closed by close(), owned by the job
        self._index: dict[int, tuple[int, int]] = {}  # buffer number -> (offset, frame length)
        self._end = 0
        self.written_bytes = 0
        self.read_bytes = 0
        self.disk_s = 0.0
        self.closed = False

    def __contains__(self, number: int) -> bool:
        return number in self._index

    def __len__(self) -> int:
        """Buffers in the file."""
        return len(self._index)

    def write(self, number: int, records: list[object], size: int) -> None:
        """Append buffer ``number`` (its records, ``size`` bytes) as one frame."""
        began = self._clock()
        payload = pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL)
        frame = HEADER.pack(len(payload), size) + payload
        if len(frame) < size:
            frame += bytes(size - len(frame))
        self._file.seek(self._end)
        self._file.write(frame)
        self._index[number] = (self._end, len(frame))
        self._end += len(frame)
        self.written_bytes += size
        self.disk_s += self._clock() - began

    def read(self, number: int) -> tuple[list[object], int]:
        """Buffer ``number``'s records and byte size, read back from the disk.

        Raises:
            KeyError: the buffer was never written.
        """
        began = self._clock()
        offset, length = self._index[number]
        self._file.flush()
        self._file.seek(offset)
        frame = self._file.read(length)
        payload_length, size = HEADER.unpack_from(frame)
        records: list[object] = pickle.loads(frame[HEADER.size : HEADER.size + payload_length])
        self.read_bytes += size
        self.disk_s += self._clock() - began
        return records, size

    def counters(self) -> SpillCounters:
        """What the file did so far (any thread)."""
        return SpillCounters(self.written_bytes, self.read_bytes, self.disk_s)

    def close(self) -> None:
        """Close and delete the file; idempotent."""
        if self.closed:
            return
        self.closed = True
        self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


READ_SEGMENT = -1
"""The segment id of a buffer read back from a spill file: read memory, not a network segment."""


class SpillReader:
    """Buffers read back from one subpartition's spill file, counted until their reader recycles
    them: what blocking and hybrid subpartitions share.

    Args:
        file: the subpartition's spill file.
        channel: the consuming subtask (the subpartition's index).
    """

    __slots__ = ("channel", "file", "outstanding")

    def __init__(self, file: SpillFile, channel: int) -> None:
        self.file = file
        self.channel = channel
        self.outstanding = 0  # read buffers handed out and not recycled yet

    def read(self, number: int) -> Buffer:
        """Buffer ``number`` read back from the file into a read buffer of its own."""
        records, size = self.file.read(number)
        self.outstanding += 1
        return Buffer(READ_SEGMENT, records, size, self, self.channel)

    def recycle(self, segment: int, channel: int) -> None:
        """A read buffer comes back from the reader."""
        self.outstanding -= 1

    def leaks(self) -> list[str]:
        """Read buffers never recycled, or the file left behind, after the file was closed."""
        problems = []
        if self.outstanding:
            problems.append(f"{self.outstanding} read buffers of subpartition {self.channel} out")
        if not self.file.closed or self.file.path.exists():
            problems.append(f"spill file {self.file.path} not removed")
        return problems
