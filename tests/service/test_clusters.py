"""``ClusterWatch``: which jobs of which clusters get a watch, and when. Its lister and starter
are the two seams to a cluster (``running_jobs``) and to the registry (``Watches.start_flink``);
here they are scripted, so every case is exact. ``tests/collectors/flink/test_clusters_e2e.py``
runs the real command over a real cluster."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from bpmon.model.errors import CollectorError, TargetNotFoundError
from bpmon.service.clusters import ClusterWatch, cluster_label
from bpmon.service.watching import AlreadyWatchedError
from tests.waiting import wait_until

A, B = "http://127.0.0.1:8081", "http://10.0.0.7:8081"


class Clusters:
    """Each cluster's running jobs, changed by the test; a cluster may be down."""

    def __init__(self, **jobs: list[tuple[str, str]]) -> None:
        self.jobs = {A: jobs.get("a", []), B: jobs.get("b", [])}
        self.down: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, url: str) -> list[tuple[str, str]]:
        with self.lock:
            if url in self.down:
                raise CollectorError(f"cannot reach Flink at {url}: connection refused")
            return list(self.jobs[url])


class Starter:
    """Records each watch started; ``busy`` names refuse once (a previous watch still ending),
    ``broken`` ones always."""

    def __init__(
        self, busy: frozenset[str] = frozenset(), broken: frozenset[str] = frozenset()
    ) -> None:
        self.started: list[tuple[str, str | None, str | None]] = []
        self.busy, self.broken = set(busy), set(broken)

    def start_flink(self, url: str, *, job: str | None = None, label: str | None = None) -> str:
        if job in self.broken:
            raise CollectorError(f"Flink 1.17.2 at {url} is older than bpmon supports")
        if job in self.busy:
            self.busy.discard(job)
            raise AlreadyWatchedError(f"job {job!r} is watched already; stop it first")
        self.started.append((url, job, label))
        return f"{job} @ {label}" if label else str(job)


@pytest.fixture
def stopping() -> Iterator[list[ClusterWatch]]:
    made: list[ClusterWatch] = []
    yield made
    for watch in made:
        watch.stop()


def watching(
    made: list[ClusterWatch],
    starter: Starter,
    clusters: Clusters,
    *urls: str,
    job: str | None = None,
) -> ClusterWatch:
    watch = ClusterWatch(starter, urls or (A,), job=job, every_s=0.05, lister=clusters)
    made.append(watch)
    return watch


def test_every_running_job_then_each_one_submitted_later(stopping: list[ClusterWatch]) -> None:
    clusters, starter = Clusters(a=[("j1", "orders"), ("j2", "clicks")]), Starter()
    assert watching(stopping, starter, clusters).start() == ["j1", "j2"]
    with clusters.lock:
        clusters.jobs[A].append(("j3", "payments"))
    wait_until(lambda: len(starter.started) == 3, "the job submitted later watched")
    assert [job for _, job, _ in starter.started] == ["j1", "j2", "j3"]
    assert all(label is None for _, _, label in starter.started)  # one cluster: names as they are


def test_a_job_is_watched_once_and_one_submitted_again_under_its_name_is_a_new_watch(
    stopping: list[ClusterWatch],
) -> None:
    clusters, starter = Clusters(a=[("j1", "orders")]), Starter()
    watching(stopping, starter, clusters).start()
    threading.Event().wait(0.3)  # a few looks with it still running: one watch
    assert starter.started == [(A, "j1", None)]
    with clusters.lock:  # cancelled (its watch ends by itself), then submitted again: a new id
        clusters.jobs[A] = [("j9", "orders")]
    wait_until(lambda: len(starter.started) == 2, "the job submitted again watched")
    assert [job for _, job, _ in starter.started] == ["j1", "j9"]


def test_a_job_whose_previous_watch_is_still_ending_is_tried_again(
    stopping: list[ClusterWatch],
) -> None:
    clusters, starter = Clusters(a=[("j1", "orders")]), Starter(busy=frozenset({"j1"}))
    assert watching(stopping, starter, clusters).start() == []
    wait_until(lambda: starter.started == [(A, "j1", None)], "the job watched at the next look")


def test_several_clusters_label_each_job_with_its_own(stopping: list[ClusterWatch]) -> None:
    clusters, starter = Clusters(a=[("j1", "orders")], b=[("k1", "orders")]), Starter()
    names = watching(stopping, starter, clusters, A, B).start()
    assert names == ["j1 @ 127.0.0.1:8081", "k1 @ 10.0.0.7:8081"]
    assert cluster_label("flink.internal:8081") == "flink.internal:8081"


def test_flink_job_narrows_every_cluster_to_that_id_or_name(stopping: list[ClusterWatch]) -> None:
    clusters = Clusters(a=[("j1", "orders"), ("j2", "clicks")], b=[("k1", "orders")])
    starter = Starter()
    assert watching(stopping, starter, clusters, A, B, job="orders").start() == [
        "j1 @ 127.0.0.1:8081",
        "k1 @ 10.0.0.7:8081",
    ]
    with pytest.raises(TargetNotFoundError, match="--flink-job nope: no running job"):
        watching(stopping, Starter(), clusters, A, job="nope").start()


def test_at_the_start_a_cluster_down_or_a_job_bpmon_cannot_watch_is_an_error(
    stopping: list[ClusterWatch],
) -> None:
    clusters = Clusters(a=[("j1", "orders")])
    clusters.down.add(A)
    with pytest.raises(CollectorError, match="cannot reach Flink"):
        watching(stopping, Starter(), clusters).start()
    clusters.down.clear()
    with pytest.raises(CollectorError, match="older than bpmon supports"):
        watching(stopping, Starter(broken=frozenset({"j1"})), clusters).start()


def test_later_a_cluster_down_is_looked_at_again(stopping: list[ClusterWatch]) -> None:
    clusters, starter = Clusters(a=[("j1", "orders")]), Starter()
    watching(stopping, starter, clusters).start()
    with clusters.lock:
        clusters.down.add(A)
        clusters.jobs[A].append(("j2", "clicks"))
    threading.Event().wait(0.3)  # a few looks while it is down: nothing started, nothing raised
    assert len(starter.started) == 1
    with clusters.lock:
        clusters.down.clear()
    wait_until(lambda: len(starter.started) == 2, "the job found once the cluster answers")
