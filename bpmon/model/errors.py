"""The errors bpmon raises, as one small tree.

Every error a user can meet is a :class:`BpmonError`; the CLI turns it into one line and a
non-zero exit code. Leaves also subclass the builtin they are, so callers that do not know bpmon
still catch them naturally::

    BpmonError
    ├── ConfigError (ValueError)          a setting or argument is out of range
    │   └── ScenarioError                 a scenario or topology file is malformed
    ├── InsufficientBuffersError (RuntimeError)
    │                                     a network buffer pool cannot meet its minimum
    ├── JobError (RuntimeError)           a runtime job failed (a task raised)
    ├── WaitCancelledError (RuntimeError)
    │                                     a blocking runtime call was woken by cancellation
    ├── CollectorError (RuntimeError)     a collector cannot read its target
    │   ├── TargetNotFoundError (LookupError)    no such process, run or job
    │   ├── PermissionDeniedError (PermissionError)
    │   └── UnavailableError              not now: a timeout, HTTP 5xx, a job restarting
    ├── JobOverError                      the watched job ended by itself (not a failure)
    ├── HistoryError (RuntimeError)       a stored report or history file is unreadable
    └── SaveError (OSError)               a diagnosis was made but could not be saved

A traceback reaching the user is a bug: anything expected is one of these.
"""

from __future__ import annotations


class BpmonError(Exception):
    """Root of every error bpmon raises on purpose.

    Attributes:
        exit_code: the process exit code the CLI uses for this error.
    """

    exit_code = 1


class ConfigError(BpmonError, ValueError):
    """A setting, argument or file value is invalid; the message names it and the fix."""

    exit_code = 2


class ScenarioError(ConfigError):
    """A scenario or topology file is malformed: the message names file, key and value."""


class InsufficientBuffersError(BpmonError, RuntimeError):
    """A network buffer pool cannot be created because too few segments exist."""

    exit_code = 3


class JobError(BpmonError, RuntimeError):
    """A runtime job failed: a task raised; the message names the subtask and the cause."""

    exit_code = 4


class WaitCancelledError(BpmonError, RuntimeError):
    """A blocking runtime call was woken because its job or pool was cancelled or destroyed."""


class CollectorError(BpmonError, RuntimeError):
    """A collector cannot read its target (py-spy failed, Flink unreachable, ...)."""

    exit_code = 5


class TargetNotFoundError(CollectorError, LookupError):
    """The process, run or job to watch does not exist."""


class PermissionDeniedError(CollectorError, PermissionError):
    """The operating system refused access to the target (ptrace)."""


class UnavailableError(CollectorError):
    """The target cannot be read for now, and may answer again: a timeout, an HTTP 5xx, a Flink
    job that is ``RESTARTING`` or ``CREATED``.

    A watch until stopped keeps going: it waits (with backoff) and tries again, and its next
    report says how long the gap was and why. A watch of a planned number of bursts gives up
    once the gap is longer than its patience.
    """


class JobOverError(BpmonError):
    """The watched job ended by itself: a bounded job finished, a Flink job was cancelled or
    finished, the watched process exited. Not a failure: the watch ends ``ended``, with the
    bursts taken so far; the message says how the job ended. Raised to a user only when no
    burst could be taken at all (exit code 5, as a target that cannot be read)."""

    exit_code = 5


class HistoryError(BpmonError, RuntimeError):
    """A stored report or history file cannot be read; nothing stored is changed."""

    exit_code = 6


class SaveError(BpmonError, OSError):
    """A report was made (and shown) but could not be saved: the disk is full, the runs
    directory became read-only, another writer holds that burst. The message names the file."""

    exit_code = 7
