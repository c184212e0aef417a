"""The Spark session of ``bpmon analyze``: quiet, timed, on any master, or one clear error.

``local[*]`` runs Spark inside this machine's JVM; ``spark://HOST:PORT`` (a standalone cluster),
``yarn`` or ``k8s://...`` send the work to a cluster whose executors must read the history's
files at the same path (a shared file system). The session is quiet: log level WARN from the
first line (a log4j2 configuration is handed to the driver's JVM), no console progress bar, and
no web UI unless asked for. Its start-up time is reported, since on a small machine it is most of
an analysis.

A missing pyspark or Java is one :class:`MissingDependencyError` line naming the fix, raised
before anything starts; a master that cannot be reached is one :class:`AnalyticsError` line.

pyspark is imported inside the functions, here and in ``analytics.py`` only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from bpmon.history.atomic import atomic_write
from bpmon.history.store import MissingDependencyError
from bpmon.model.errors import BpmonError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SETUP_HINT = "run scripts/setup --spark (or pip install 'bpmon[spark]' and a Java 17 runtime)"

_LOG4J = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = spark: %p %c{1}: %m%n
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.strings.name = org.apache.spark.util.SparkStringUtils
logger.strings.level = error
"""
"""WARN and above on stderr, minus the start-up chatter of a local machine (the native Hadoop
library, the loopback address, Parquet's own logging) and the notice that a plan's text was
cut short (the analysis's one job has a wide plan; nobody reads its text)."""


JIT = "-XX:TieredStopAtLevel=1"
"""The driver's JVM compiles with C1 only: an analysis is one short-lived JVM whose time goes to
compiling Spark's many classes once, not to long loops (measured: 1 M rows 42 s instead of 62 s
on the 2-core machine; 10 M rows no slower)."""

CLUSTER_SHUFFLE_PARTITIONS = 16
"""Shuffle partitions on a cluster (or ``local[*]``); ``local[N]`` uses 2 x N."""


class AnalyticsError(BpmonError, RuntimeError):
    """Spark could not start or run the analysis (an unreachable master, a failed job)."""


def java_missing() -> str | None:
    """Why Spark cannot find Java, or None when it can (``JAVA_HOME`` first, then ``PATH``)."""
    home = os.environ.get("JAVA_HOME")
    if home:
        if (Path(home) / "bin" / "java").is_file():
            return None
        return f"JAVA_HOME={home} has no bin/java"
    if shutil.which("java") is None:
        return "no java on PATH and JAVA_HOME is not set"
    return None


def local_cores(master: str) -> int | None:
    """The cores a ``local[N]`` master uses (None for ``local[*]`` and cluster masters)."""
    if master == "local":
        return 1
    if master.startswith("local[") and master.endswith("]"):
        inner = master[6:-1].split(",", maxsplit=1)[0]
        return int(inner) if inner.isdigit() else None
    return None


@contextlib.contextmanager
def spark_session(
    master: str = "local[*]", *, ui: bool = False, progress: Callable[[str], None] | None = None
) -> Iterator[SparkSession]:
    """A Spark session on ``master``, stopped on exit unless it was already running.

    An active session (a test session's, a notebook's) is used as it is and left running.

    Raises:
        MissingDependencyError: pyspark or Java is missing.
        AnalyticsError: Spark did not start (bad master, unreachable cluster).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise MissingDependencyError(f"pyspark is not installed: {SETUP_HINT}") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    problem = java_missing()
    if problem is not None:
        raise MissingDependencyError(f"Spark needs a Java 17 runtime ({problem}): {SETUP_HINT}")
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)  # one line is ours
    session = _start(master, ui, progress)
    try:
        yield session
    except Exception as exc:
        if not _from_spark(exc):
            raise
        raise AnalyticsError(f"the analysis failed on {master}: {_first_line(exc)}") from None
    finally:
        session.stop()


def _from_spark(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark's or py4j's (a failed job), not a bug of bpmon's."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark.errors import PySparkException

    return isinstance(exc, PySparkException | Py4JError)


def _start(master: str, ui: bool, progress: Callable[[str], None] | None) -> SparkSession:
    from pyspark.sql import SparkSession

    config = Path(tempfile.gettempdir()) / f"bpmon-log4j2-{os.getuid()}.properties"
    if not config.is_file() or config.read_text() != _LOG4J:
        with atomic_write(config) as out:  # another bpmon's Spark may be reading it now
            out.write(_LOG4J.encode())
    cores = local_cores(master)
    builder = (
        SparkSession.builder.master(master)
        .appName("bpmon analyze")
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{config} {JIT}")
    )
    # The first pass shrinks the rows fifty-fold or more before any shuffle, so a few shuffle
    # partitions suffice: Spark's 200 cost a task each per stage, seconds on a small cluster.
    partitions = max(2, 2 * cores) if cores is not None else CLUSTER_SHUFFLE_PARTITIONS
    builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    began = time.monotonic()
    try:
        with _jvm_stderr_filtered():
            session = builder.getOrCreate()
    except Exception as exc:  # py4j and pyspark raise several types for the same failure
        raise AnalyticsError(f"Spark did not start on {master}: {_first_line(exc)}") from None
    session.sparkContext.setLogLevel("WARN")
    if progress is not None:
        progress(
            f"spark {session.version} on {master}: session started in "
            f"{time.monotonic() - began:.1f} s{' (UI on)' if ui else ''}"
        )
    return session


@contextlib.contextmanager
def _jvm_stderr_filtered() -> Iterator[None]:
    """Start the JVM with its stderr through a filter that drops the JVM's own start-up notice
    (``Using incubator modules``); everything else it writes goes on to our stderr.

    The JVM inherits a pipe as its stderr while it starts; ours is put back at once, and a
    daemon thread copies the pipe to it, line by line, until the JVM exits.
    """
    try:
        sys.stderr.flush()
        read, write = os.pipe()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable stderr (a closed or detached stream)
        yield
        return
    copier = threading.Thread(target=_copy_lines, args=(read, saved), daemon=True)
    copier.name = "bpmon-jvm-stderr"
    copier.start()
    os.dup2(write, 2)
    os.close(write)
    try:
        yield
    finally:
        os.dup2(saved, 2)


def _copy_lines(read: int, target: int) -> None:
    with os.fdopen(read, "rb") as source:
        for line in source:
            if b"Using incubator modules" in line:
                continue
            try:
                os.write(target, line)
            except OSError:
                return


def _first_line(exc: BaseException) -> str:
    """The useful line of a Spark or py4j error (they carry a Java stack trace)."""
    text = str(exc).strip()
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith(("at ", "Traceback", "py4j")):
            return line[:300]
    return type(exc).__name__
