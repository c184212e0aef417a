"""Re-record the Flink REST responses the parsing tests read (``fixtures/TOPOLOGY/``).

Run: ``.venv/bin/python tests/collectors/flink/record.py [--url http://127.0.0.1:8081]``.
Without ``--url`` it starts its own cluster (``cluster.py``) and stops it at the end. For each
recorded topology it runs the test job for 15 s, then saves, as the collector asks for them:
``/config``, ``/jobs/overview`` (this job only), the job's status, ``/jobs/{id}``, its plan,
every vertex's subtasks, metric list (first vertex only), metric values (the collector's own
query) and backpressure, and ONE thread dump of the task manager, trimmed to the job's task
threads and their helpers. (No dump of these jobs shows hard backpressure on Flink 2.3: even a
40 KB record over 4 KB buffers finishes on overdraft buffers, then the task suspends in its
mailbox.)

The files are small, readable JSON; ``routes.json`` maps every recorded path to its file (a
``?get`` suffix: the metric values, as opposed to the metric list), which is what
``test_replay.py`` serves.

The checkpointed topologies (``checkpoint-aligned``, ``checkpoint-unaligned``, and
``checkpoint-expired``: aligned with a 2 s timeout, so every checkpoint fails) also save what
``checkpoints.py`` asks for: the job's checkpoint config, ``/checkpoints``, and each vertex's
subtask details of the newest completed and newest failed checkpoint; ``checkpoints-off`` saves
only the first two of a job that does not checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bpmon.collectors.flink.metrics import CANDIDATES

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from cluster import ADAPTIVE, Cluster  # type: ignore[import-not-found]  # noqa: E402

FIXTURES = HERE / "fixtures"
TOPOLOGIES = (
    "slow-sink",
    "hot-key",
    "legacy-slow-map",
    "same-names",
    "partly-bounded",
    "rescale",
    *(CHECKPOINTED := ("checkpoint-aligned", "checkpoint-unaligned", "checkpoint-expired")),
    "checkpoints-off",
)
RUN_S = 15.0
RESCALED = "enrich"
"""The vertex ``rescale`` rescales (the ``healthy`` job's), 2 -> 3 -> 1."""


def record(cluster: Cluster, topology: str) -> None:
    """Run ``topology``, save its responses under ``fixtures/TOPOLOGY``, cancel it."""
    if topology == "rescale":
        record_rescale(cluster)
        return
    if topology in CHECKPOINTED or topology == "checkpoints-off":
        record_checkpoints(cluster, topology)
        return
    job = cluster.submit(topology)
    try:
        time.sleep(RUN_S)
        save_job(cluster, job, FIXTURES / topology)
    finally:
        cluster.cancel(job)


def record_rescale(cluster: Cluster) -> None:
    """The ``healthy`` job (``enrich`` at parallelism 2) under ``fixtures/rescale/before``, then
    rescaled by the adaptive scheduler (``PUT /jobs/{id}/resource-requirements``; the cluster
    must run ``jobmanager.scheduler: adaptive``) to 3 (``up``), then to 1 (``down``)."""
    job = cluster.submit("healthy", args=("2",))
    try:
        time.sleep(RUN_S)
        save_job(cluster, job, FIXTURES / "rescale" / "before")
        for parallelism, name in ((3, "up"), (1, "down")):
            cluster.rescale(job, RESCALED, parallelism)
            time.sleep(RUN_S / 2)
            save_job(cluster, job, FIXTURES / "rescale" / name)
    finally:
        cluster.cancel(job)


def record_checkpoints(cluster: Cluster, topology: str) -> None:
    """A checkpointed job, once a checkpoint ended as its topology's do (``checkpoint-expired``:
    failed); ``checkpoints-off``: slow-map's two checkpoint documents only."""
    out = FIXTURES / topology
    if topology == "checkpoints-off":
        job = cluster.submit("slow-map")
        try:
            time.sleep(RUN_S / 3)
            out.mkdir(parents=True, exist_ok=True)
            routes = {}
            for path, name in (
                ("checkpoints/config", "checkpoints-config"),
                ("checkpoints", "checkpoints"),
            ):
                document = cluster.get(f"/jobs/{job}/{path}")
                (out / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
                routes[f"/jobs/{job}/{path}"] = f"{name}.json"
            (out / "routes.json").write_text(json.dumps(routes, indent=1, sort_keys=True) + "\n")
        finally:
            cluster.cancel(job)
        return
    with tempfile.TemporaryDirectory(prefix="bpmon-checkpoints-") as storage:
        if topology == "checkpoint-expired":
            job = cluster.submit("checkpoint-aligned", args=(storage, "2000"))
        else:
            job = cluster.submit(topology, args=(storage,))
        try:
            time.sleep(RUN_S)
            save_job(cluster, job, out, checkpoints=True)
        finally:
            cluster.cancel(job)


def save_job(cluster: Cluster, job: str, out: Path, *, checkpoints: bool = False) -> None:
    """Save every response the collector asks for about ``job`` (running) under ``out``
    (``checkpoints``: its checkpoint statistics too)."""
    out.mkdir(parents=True, exist_ok=True)
    routes: dict[str, str] = {}

    def save(path: str, name: str, document: Any) -> None:
        (out / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
        routes[path] = f"{name}.json"

    save("/config", "config", cluster.get("/config"))
    jobs = [j for j in cluster.get("/jobs/overview")["jobs"] if j["jid"] == job]
    save("/jobs/overview", "overview", {"jobs": jobs})
    save(f"/jobs/{job}/status", "status", cluster.get(f"/jobs/{job}/status"))
    details = cluster.get(f"/jobs/{job}")
    save(f"/jobs/{job}", "job", details)
    save(f"/jobs/{job}/plan", "plan", cluster.get(f"/jobs/{job}/plan"))
    names = [str(v["name"]) for v in details["vertices"]]
    wanted = {n for c in CANDIDATES.values() for n in c}
    managers = set()
    for i, v in enumerate(details["vertices"]):
        base = f"/jobs/{job}/vertices/{v['id']}"
        subtasks = cluster.get(base)
        save(base, f"vertex-{i}", subtasks)
        managers |= {str(s["taskmanager-id"]) for s in subtasks["subtasks"]}
        listed = cluster.get(f"{base}/metrics")
        ids = sorted(str(m["id"]) for m in listed if str(m["id"]).split(".", 1)[-1] in wanted)
        # vertex 0: every id Flink 2.3 offers for a task; the others: those bpmon reads
        shown = listed if i == 0 else [{"id": m} for m in ids]
        save(f"{base}/metrics", f"metric-list-{i}", shown)
        if ids:  # a FINISHED vertex has none
            values = cluster.get(f"{base}/metrics?get={','.join(ids)}")
            save(f"{base}/metrics?get", f"metrics-{i}", values)
        save(f"{base}/backpressure", f"backpressure-{i}", cluster.get(f"{base}/backpressure"))
    for k, tm in enumerate(sorted(managers)):
        suffix = "" if len(managers) == 1 else f"-{k}"
        save(f"/taskmanagers/{tm}/thread-dump", f"thread-dump{suffix}", _dump(cluster, tm, names))
    if checkpoints:
        base = f"/jobs/{job}/checkpoints"
        save(f"{base}/config", "checkpoints-config", cluster.get(f"{base}/config"))
        statistics = cluster.get(base)
        save(base, "checkpoints", _trimmed(statistics))
        for ended in (statistics["latest"]["completed"], statistics["latest"]["failed"]):
            if ended is None:
                continue
            cid = ended["id"]
            for i, v in enumerate(details["vertices"]):
                path = f"{base}/details/{cid}/subtasks/{v['id']}"
                save(path, f"checkpoint-{cid}-vertex-{i}", cluster.get(path))
    (out / "routes.json").write_text(json.dumps(routes, indent=1, sort_keys=True) + "\n")


def _trimmed(statistics: dict[str, Any]) -> dict[str, Any]:
    """``/checkpoints`` with its history cut to the newest three (bpmon reads none of it)."""
    return {**statistics, "history": statistics.get("history", [])[:3]}


def _dump(cluster: Cluster, tm: str, names: list[str]) -> dict[str, Any]:
    """One thread dump trimmed to the job's threads (and a few others, to check ``ignore``)."""
    infos = cluster.get(f"/taskmanagers/{tm}/thread-dump")["threadInfos"]
    mine = [t for t in infos if any(n in t["threadName"] for n in names)]
    others = [t for t in infos if t not in mine][:3]
    return {"threadInfos": mine + others}


def main() -> int:
    """Record every topology of :data:`TOPOLOGIES` (``--only``: some of them)."""
    parser = argparse.ArgumentParser(description="Re-record the Flink REST fixtures.")
    parser.add_argument(
        "--url",
        help="a running test cluster (scripts/flink-cluster start); rescale needs one with "
        "jobmanager.scheduler: adaptive",
    )
    parser.add_argument("--only", nargs="*", default=list(TOPOLOGIES), choices=TOPOLOGIES)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp), config=ADAPTIVE)
        if args.url:
            cluster.url = args.url.rstrip("/")
        else:
            cluster.start()
        try:
            for topology in args.only:
                record(cluster, topology)
                print(f"recorded {topology} in {FIXTURES / topology}")
        finally:
            if not args.url:
                cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
