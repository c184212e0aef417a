"""A real standalone Flink cluster on loopback, for bpmon's tests, benchmark and recordings.

The distribution comes from PyPI (``scripts/setup --flink [VERSION]`` installs ``apache-flink``
and ``apache-flink-libraries`` without their dependencies into ``.venv/flink/VERSION``). One
setting picks the version every test cluster runs: ``$BPMON_FLINK_VERSION`` (2.3.0 unless set;
``$BPMON_FLINK_HOME`` points at a distribution elsewhere). :class:`Cluster` writes its own
configuration into a work folder (loopback only, free ports, its own pid and log folders), starts
the JobManager and N TaskManagers with Flink's own ``bin/start-cluster.sh`` and stops them with
``bin/stop-cluster.sh``. The test jobs
(``jobs/BpmonFlinkJobs.java``) are written against Flink 2's API and compiled with ``javac``
against the distribution's jars; for a 1.x cluster the few names that moved since are written
back (:data:`OLDER_API`) before compiling. They are uploaded once, and run and cancelled over REST.

Also a command: ``python tests/collectors/flink/cluster.py start|stop|submit TOPOLOGY|cancel JOB``
(``scripts/flink-cluster`` calls it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
JOBS_SOURCE = Path(__file__).with_name("jobs") / "BpmonFlinkJobs.java"
JOBS_SOURCES = sorted(JOBS_SOURCE.parent.glob("*.java"))
"""Every job source, compiled into one jar: the test jobs, the SQL jobs and the corpus
(``corpus.py``)."""
JOBS_RESOURCES = sorted(p for p in (JOBS_SOURCE.parent / "META-INF").rglob("*") if p.is_file())
"""Files the jar carries as they are: the service file that lets the SQL planner find the
SQL jobs' ``bpmon-slow`` sink connector."""
DEFAULT_WORKDIR = REPO / ".venv" / "flink-cluster"
JAR_CACHE = REPO / ".venv" / "flink-jobs"
FLINK_VERSION = os.environ.get("BPMON_FLINK_VERSION") or "2.3.0"
"""The Flink every test cluster runs (``scripts/setup --flink VERSION`` installs it)."""
EXECUTION_CHECKPOINTING = "org.apache.flink.streaming.api.environment.ExecutionCheckpointingOptions"
OLDER_API: tuple[tuple[tuple[int, ...], str, str], ...] = (
    (
        (2,),
        "org.apache.flink.streaming.api.functions.source.legacy.",
        "org.apache.flink.streaming.api.functions.source.",
    ),
    (
        (2,),
        "import org.apache.flink.api.connector.sink2.WriterInitContext;",
        "import org.apache.flink.api.connector.sink2.Sink.InitContext;",
    ),
    ((2,), "createWriter(WriterInitContext ", "createWriter(InitContext "),
    (
        (1, 19),
        "import org.apache.flink.api.common.functions.OpenContext;",
        "import org.apache.flink.configuration.Configuration;",
    ),
    ((1, 19), "open(OpenContext ", "open(Configuration "),
    ((1, 19), ".getTaskInfo().getIndexOfThisSubtask()", ".getIndexOfThisSubtask()"),
    (
        (1, 19),
        ".between(Duration.ofSeconds(-2), Duration.ofSeconds(2))",
        ".between(org.apache.flink.streaming.api.windowing.time.Time.seconds(-2), "
        "org.apache.flink.streaming.api.windowing.time.Time.seconds(2))",
    ),
    *(
        ((1, 20), f"CheckpointingOptions.{option}", f"{EXECUTION_CHECKPOINTING}.{option}")
        for option in (
            "CHECKPOINTING_INTERVAL",
            "CHECKPOINTING_TIMEOUT",
            "ENABLE_UNALIGNED",
            "ALIGNED_CHECKPOINT_TIMEOUT",
            "TOLERABLE_FAILURE_NUMBER",
        )
    ),
)
"""What moved in the API the test jobs use, as (first version with the new text, new text, old
text): Flink 2 moved the legacy ``SourceFunction`` into a ``legacy`` package and dropped
``Sink.InitContext`` for ``WriterInitContext`` (abstract in 1.x); 1.20 moved the checkpointing
options from ``ExecutionCheckpointingOptions`` to ``CheckpointingOptions``; 1.19 brought
``OpenContext`` (for ``open(Configuration)``), ``RuntimeContext.getTaskInfo()`` and interval
joins bounded by a ``Duration`` (for ``Time``)."""
COMPAT_SOURCES = {(1, 19): sorted((JOBS_SOURCE.parent / "compat" / "1.18").glob("*.java"))}
"""Sources compiled in below a version: 1.18's distribution has no FLIP-27 datagen connector,
so its jobs bring the part of it they use."""
TOPOLOGIES = ("slow-map", "hot-key", "slow-sink", "healthy", "fan-in")
ADAPTIVE = {
    "jobmanager.scheduler": "adaptive",
    "jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout": "1 s",
    "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "1 s",
    "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout": "1 s",
    "execution.checkpointing.interval": "2 s",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "1000",
    "restart-strategy.fixed-delay.delay": "1 s",
    "heartbeat.interval": "1000",
    "heartbeat.timeout": "5000",
    "web.timeout": "10000",
}
"""A cluster that rescales a running job (``PUT /jobs/{id}/resource-requirements``) and rides out
a lost TaskManager within seconds: Flink's adaptive scheduler with short stabilisation and
cooldown (1 s, not 10-60 s), checkpoints every 2 s (the scheduler rescales on one), restarts
without end, heartbeats that notice a killed TaskManager in 5 s (not 50), and ``web.timeout``
10 s: the REST metric store's fetcher waits that long for a dead TaskManager's metrics before it
fetches anyone's again (10 min by default, seen on Flink 2.3)."""


FLAMEGRAPH = {
    "rest.flamegraph.enabled": "true",
    "rest.flamegraph.refresh-interval": "1 s",
}
"""Flink's own sampler on (``Cluster(flamegraph=True)``), its graphs cached 1 s instead of 60 s
so bursts back to back each get a fresh one (what docs/flink.md tells a user to set)."""


def flink_home() -> Path | None:
    """The Flink distribution's folder (with ``bin/start-cluster.sh``), None if not installed."""
    configured = os.environ.get("BPMON_FLINK_HOME")
    home = Path(configured) if configured else REPO / ".venv" / "flink" / FLINK_VERSION / "pyflink"
    ok = (home / "bin" / "start-cluster.sh").is_file() and any(home.glob("lib/flink-dist*.jar"))
    return home if ok else None


def home_version(home: Path) -> tuple[int, ...]:
    """The distribution's version, from its ``flink-dist-X.Y.Z.jar``: ``(1, 20, 3)``."""
    jar = next(home.glob("lib/flink-dist*.jar"))
    return tuple(int(p) for p in jar.stem.rsplit("-", 1)[-1].split(".") if p.isdigit())


def missing_reason() -> str | None:
    """Why a real cluster cannot run here, None when it can."""
    if flink_home() is None:
        return (
            f"Flink {FLINK_VERSION} is not installed: scripts/setup --flink {FLINK_VERSION} "
            f"installs it into .venv/flink/{FLINK_VERSION}"
        )
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} is missing: install a JDK 17 (apt-get install openjdk-17-jdk-headless)"
    return None


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Cluster:
    """A standalone Flink cluster of ``task_managers`` TaskManagers in ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        *,
        task_managers: int = 1,
        port: int | None = None,
        slots: int = 8,
        fetch_interval_ms: int = 1000,
        config: dict[str, str] | None = None,
        flamegraph: bool = False,
        task_manager_memory: str = "1024m",
    ) -> None:
        home = flink_home()
        if home is None:
            raise RuntimeError(missing_reason() or "Flink is not installed")
        self.home, self.workdir = home, workdir
        self.version = home_version(home)
        # Flink 1.19 brought config.yaml (standard YAML); 1.18 reads only flink-conf.yaml. The
        # options written here are flat "key: value" lines, valid in both.
        self.config_file = "config.yaml" if self.version >= (1, 19) else "flink-conf.yaml"
        self.task_managers, self.slots = task_managers, slots
        self.fetch_interval_ms = fetch_interval_ms
        self.task_manager_memory = task_manager_memory
        self.config = {**(FLAMEGRAPH if flamegraph else {}), **(config or {})}
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._jar_id: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """Flink's scripts read their configuration, pid and log folders from these."""
        return {
            **os.environ,
            "FLINK_CONF_DIR": str(self.workdir / "conf"),
            "FLINK_LOG_DIR": str(self.workdir / "log"),
            "FLINK_PID_DIR": str(self.workdir / "pid"),
        }

    def write_config(self) -> None:
        """Loopback only, free ports, small memory and buffers; metrics fetched every second.

        ``fetch_interval_ms``: how stale a metric the REST API serves may be (Flink's metric
        fetcher refreshes at most this often); the fidelity benchmark lowers it to time build-up.
        ``config``: more options, written last (the chaos test's adaptive scheduler).
        ``task_manager_memory`` (constructor): each TaskManager's process size, 1024m by default
        (a task heap of a few dozen MB); the large-state checkpoint test needs more.
        ``flamegraph`` (constructor): Flink's sampler on (:data:`FLAMEGRAPH`); off by default,
        as on a cluster nobody configured.
        """
        conf = self.workdir / "conf"
        for sub in ("conf", "log", "pid"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        shutil.copy(self.home / "conf" / "log4j.properties", conf / "log4j.properties")
        (conf / "workers").write_text("localhost\n" * self.task_managers)
        (conf / "masters").write_text(f"localhost:{self.port}\n")
        (conf / self.config_file).write_text(
            "\n".join(
                [
                    "jobmanager.rpc.address: 127.0.0.1",
                    "jobmanager.bind-host: 127.0.0.1",
                    f"jobmanager.rpc.port: {free_port()}",
                    "jobmanager.memory.process.size: 800m",
                    "taskmanager.host: 127.0.0.1",
                    "taskmanager.bind-host: 127.0.0.1",
                    f"taskmanager.memory.process.size: {self.task_manager_memory}",
                    f"taskmanager.numberOfTaskSlots: {self.slots}",
                    "parallelism.default: 1",
                    "rest.address: 127.0.0.1",
                    "rest.bind-address: 127.0.0.1",
                    f"rest.port: {self.port}",
                    f"metrics.fetcher.update-interval: {self.fetch_interval_ms}",
                    # 4 KB network buffers (32 KB by default): backpressure builds up in seconds
                    # with the test jobs' small records, not in a minute.
                    "taskmanager.memory.segment-size: 4kb",
                    f"env.java.opts.all: {self._java_opts()}",
                    *(f"{key}: {value}" for key, value in self.config.items()),
                    "",
                ]
            )
        )

    def _java_opts(self) -> str:
        """The module opens Flink's own config sets for Java 17 (its jobs fail without them)."""
        for line in (self.home / "conf" / self.config_file).read_text().splitlines():
            for prefix in ("all:", "env.java.opts.all:"):
                if line.strip().startswith(f"{prefix} --add-"):
                    return line.split(prefix, 1)[1].strip()
        return ""

    def start(self, timeout_s: float = 90.0) -> None:
        """Start the cluster with Flink's script; wait until every TaskManager registered."""
        self.write_config()
        self._script("start-cluster.sh")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self.get("/overview").get("taskmanagers") == self.task_managers:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"Flink did not start in {timeout_s:g} s; see {self.workdir / 'log'}")

    def stop(self) -> None:
        """Stop every daemon with Flink's script (idempotent)."""
        if (self.workdir / "conf" / self.config_file).is_file():
            self._script("stop-cluster.sh")

    def _script(self, name: str, *args: str) -> None:
        subprocess.run(
            [str(self.home / "bin" / name), *args],
            env=self.env(),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )

    # -- REST -----------------------------------------------------------------------------------

    def get(self, path: str) -> Any:
        """GET ``path`` as JSON."""
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())

    def _send(self, method: str, path: str, body: bytes = b"", ctype: str = "") -> Any:
        request = urllib.request.Request(self.url + path, data=body or None, method=method)
        if ctype:
            request.add_header("Content-Type", ctype)
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
            return json.loads(text) if text else {}

    # -- jobs -----------------------------------------------------------------------------------

    def jar(self) -> Path:
        """The test jobs' jar, compiled once per source version (in :data:`JAR_CACHE`, shared by
        every cluster: a test that starts a cluster of its own does not compile again)."""
        texts = {p.name: p.read_text() for p in JOBS_SOURCES}
        for below, extra in COMPAT_SOURCES.items():
            if self.version < below:
                texts |= {p.name: p.read_text() for p in extra}
        for since, new, old in OLDER_API:
            if self.version < since:
                texts = {name: text.replace(new, old) for name, text in texts.items()}
        flavour = ".".join(map(str, self.version[:2]))
        resources = {p.relative_to(JOBS_SOURCE.parent): p.read_bytes() for p in JOBS_RESOURCES}
        digest = hashlib.sha256(
            "".join(texts.values()).encode() + b"".join(resources.values())
        ).hexdigest()[:12]
        jar = JAR_CACHE / f"bpmon-flink-jobs-{flavour}-{digest}.jar"
        if jar.is_file():
            return jar
        JAR_CACHE.mkdir(parents=True, exist_ok=True)
        classes = Path(tempfile.mkdtemp(prefix="classes-", dir=JAR_CACHE))
        try:
            sources = classes / "src"
            sources.mkdir()
            for name, text in texts.items():
                (sources / name).write_text(text)
            lib = os.pathsep.join(str(p) for p in sorted((self.home / "lib").glob("*.jar")))
            compiled = subprocess.run(
                ["javac", "-nowarn", "-cp", lib, "-d", str(classes / "out")]
                + [str(sources / name) for name in texts],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if compiled.returncode != 0:
                errors = [line for line in compiled.stderr.splitlines() if "error:" in line]
                raise RuntimeError(
                    f"the test jobs do not compile against Flink {flavour}: "
                    + "; ".join(errors[:3] or [compiled.stderr.strip()[-300:]])
                )
            for name, data in resources.items():
                (classes / "out" / name).parent.mkdir(parents=True, exist_ok=True)
                (classes / "out" / name).write_bytes(data)
            partial = classes.with_suffix(".jar")
            packing = ["jar", "cf", str(partial), "-C", str(classes / "out"), "."]
            subprocess.run(packing, check=True, timeout=120)
            os.replace(partial, jar)  # whole or absent, even with two sessions compiling at once
        finally:
            shutil.rmtree(classes, ignore_errors=True)
        return jar

    def upload(self) -> str:
        """Upload the jobs' jar (once); its id on the cluster."""
        if self._jar_id is None:
            boundary = uuid.uuid4().hex
            jar = self.jar()
            body = (
                (
                    f'--{boundary}\r\nContent-Disposition: form-data; name="jarfile"; '
                    f'filename="{jar.name}"\r\nContent-Type: application/java-archive\r\n\r\n'
                ).encode()
                + jar.read_bytes()
                + f"\r\n--{boundary}--\r\n".encode()
            )
            answer = self._send(
                "POST", "/jars/upload", body, f"multipart/form-data; boundary={boundary}"
            )
            self._jar_id = str(answer["filename"]).rsplit("/", 1)[-1]
        return self._jar_id

    def submit(
        self,
        topology: str,
        timeout_s: float = 60.0,
        *,
        wait: bool = True,
        args: tuple[str, ...] = (),
        entry: str = "BpmonFlinkJobs",
    ) -> str:
        """Run one test job; its id once every task runs and every vertex has metrics.

        ``wait=False``: its id as soon as Flink accepted it (then :meth:`wait_running`).
        ``args``: the job's arguments after the topology (``healthy``'s parallelism).
        ``entry``: the class whose ``main`` builds it (``BpmonCorpusJobs``: the corpus).
        """
        run = {"entryClass": entry, "programArgsList": [topology, *args]}
        answer = self._send(
            "POST", f"/jars/{self.upload()}/run", json.dumps(run).encode(), "application/json"
        )
        job = str(answer["jobid"])
        if wait:
            self.wait_running(job, timeout_s)
        return job

    def wait_running(
        self, job: str, timeout_s: float = 60.0, parallelism: dict[str, int] | None = None
    ) -> None:
        """Wait until every task of ``job`` runs (or finished: a bounded source) and every
        running subtask has metrics; ``parallelism``: until these vertices (by name) have it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            details = self.get(f"/jobs/{job}")
            vertices = details.get("vertices") or []
            running = [v for v in vertices if v.get("status") == "RUNNING"]
            done = all(v.get("status") in ("RUNNING", "FINISHED") for v in vertices)
            shape = parallelism or {}
            shaped = all(
                v["parallelism"] == shape.get(v["name"], v["parallelism"]) for v in vertices
            )
            if vertices and done and shaped and all(self._has_metrics(job, v) for v in running):
                return
            time.sleep(0.5)
        raise RuntimeError(f"job {job} did not start running in {timeout_s:g} s")

    def _has_metrics(self, job: str, vertex: dict[str, Any]) -> bool:
        """Whether every subtask of ``vertex`` has its metrics in the REST metric store."""
        listed = self.get(f"/jobs/{job}/vertices/{vertex['id']}/metrics")
        have = {str(m["id"]).split(".", 1)[0] for m in listed}
        return all(str(i) in have for i in range(int(vertex["parallelism"])))

    def rescale(self, job: str, vertex: str, parallelism: int, timeout_s: float = 90.0) -> None:
        """Rescale ``vertex`` (by name) of a running ``job`` with the adaptive scheduler's
        ``PUT /jobs/{id}/resource-requirements``; returns once it runs at ``parallelism``."""
        wanted = self.get(f"/jobs/{job}/resource-requirements")
        ids = [v["id"] for v in self.get(f"/jobs/{job}")["vertices"] if v["name"] == vertex]
        for vid in ids:
            wanted[vid]["parallelism"] = {"lowerBound": 1, "upperBound": parallelism}
        path = f"/jobs/{job}/resource-requirements"
        self._send("PUT", path, json.dumps(wanted).encode(), "application/json")
        self.wait_running(job, timeout_s, {vertex: parallelism})

    # -- task managers --------------------------------------------------------------------------

    def kill_task_manager(self) -> int:
        """``kill -9`` the first TaskManager, as a machine failure would; its pid (taken out
        of Flink's pid file, which ``stop`` reads for the others)."""
        pid_file = next((self.workdir / "pid").glob("*taskexecutor*.pid"))
        pids = pid_file.read_text().split()
        os.kill(int(pids[0]), signal.SIGKILL)
        pid_file.write_text("".join(f"{p}\n" for p in pids[1:]))
        return int(pids[0])

    def start_task_manager(self) -> None:
        """Start one more TaskManager with Flink's script (``stop`` stops it too)."""
        self._script("taskmanager.sh", "start")

    def cancel(self, job: str, timeout_s: float = 30.0) -> None:
        """Cancel a job and wait until it is CANCELED."""
        self._send("PATCH", f"/jobs/{job}?mode=cancel")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.get(f"/jobs/{job}/status").get("status") in ("CANCELED", "FAILED"):
                return
            time.sleep(0.3)
        raise RuntimeError(f"job {job} was not cancelled in {timeout_s:g} s")


def main(argv: list[str] | None = None) -> int:
    """``start``, ``stop``, ``submit TOPOLOGY``, ``cancel JOB`` on the cluster in ``--dir``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("start", "stop", "submit", "cancel"))
    parser.add_argument("arg", nargs="?", help="the topology (submit) or job id (cancel)")
    parser.add_argument("--dir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--task-managers", type=int, default=1)
    args = parser.parse_args(argv)
    reason = missing_reason()
    if reason is not None:
        print(f"flink-cluster: {reason}", file=sys.stderr)
        return 1
    cluster = Cluster(args.dir, task_managers=args.task_managers, port=args.port)
    if args.action == "start":
        cluster.start()
        print(cluster.url)
    elif args.action == "stop":
        cluster.stop()
    elif args.action == "submit":
        print(cluster.submit(args.arg or "slow-map"))
    else:
        cluster.cancel(args.arg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
