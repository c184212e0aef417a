"""Whole Flink clusters watched, for ``bpmon serve --monitor-flink URL`` (repeatable).

A :class:`ClusterWatch` looks at each cluster's running jobs (``GET /jobs/overview``) when it
starts and then every ``every_s`` seconds, and starts a watch (:meth:`Watches.start_flink`) for
each running job it has not watched yet: the jobs running at the start, a job submitted later,
a job submitted again under the same name (a new job id). A job that ends (finished, cancelled,
failed) ends its own watch, which the registry keeps as ``ended`` or ``failed``; its id is never
watched again. ``job`` narrows every cluster to the jobs of that id or name.

With more than one cluster, each job's name carries its cluster (``NAME @ host:port``), so two
clusters' jobs of one name are two jobs in every surface.

At the start, a cluster that does not answer is an error (``CollectorError``), and so are a job
that cannot be watched (a Flink older than bpmon supports) and a ``job`` named that runs on none
of them; later, a cluster that stops answering is retried at the next look, and a job whose
watch cannot start yet (restarting, its previous watch still ending) is tried again then.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol
from urllib.parse import urlsplit

from bpmon.collectors.flink.target import running_jobs
from bpmon.model.errors import BpmonError, TargetNotFoundError
from bpmon.service.watching import AlreadyWatchedError

_log = logging.getLogger(__name__)

Lister = Callable[[str], list[tuple[str, str]]]
"""The running jobs of the cluster at a URL, as (id, name): :func:`running_jobs`."""


class Starter(Protocol):
    """What starts a job's watch: :meth:`~bpmon.service.watching.Watches.start_flink`."""

    def start_flink(self, url: str, *, job: str | None = None, label: str | None = None) -> str:
        """Watch job ``job`` of the cluster at ``url``; bpmon's name for it."""
        ...


def cluster_label(url: str) -> str:
    """How a job's name says its cluster: the REST address's ``host:port``."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.netloc or url


class ClusterWatch:
    """Every running job of the clusters at ``urls`` watched through ``watches``.

    Args:
        watches: the server's registry of watches.
        urls: the clusters' REST addresses.
        job: only jobs of this id or name (None: every running job).
        every_s: seconds between two looks at the clusters' jobs.
        lister: the running jobs of a cluster (:func:`running_jobs`; a test may pass another).
    """

    def __init__(
        self,
        watches: Starter,
        urls: Sequence[str],
        *,
        job: str | None = None,
        every_s: float = 10.0,
        lister: Lister = running_jobs,
    ) -> None:
        self.watches, self.urls, self.job, self.every_s = watches, tuple(urls), job, every_s
        self._lister = lister
        self._labels = {u: cluster_label(u) if len(self.urls) > 1 else None for u in self.urls}
        self._seen: dict[str, set[str]] = {u: set() for u in self.urls}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> list[str]:
        """Look once (a cluster that does not answer raises), then keep looking on a thread;
        the names of the jobs watched so far."""
        started = []
        for url in self.urls:
            started += self._look(url, self._lister(url), strict=True)
        if self.job is not None and not started:
            raise TargetNotFoundError(
                f"--flink-job {self.job}: no running job of that id or name on "
                + ", ".join(self.urls)
            )
        self._thread = threading.Thread(target=self._loop, name="bpmon-flink-clusters", daemon=True)
        self._thread.start()
        return started

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop looking for new jobs (the watches themselves stop with the registry)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            for url in self.urls:
                try:
                    self._look(url, self._lister(url))
                except BpmonError as exc:  # down for now: looked at again next time
                    _log.warning("Flink cluster %s: %s", url, exc)
                if self._stop.is_set():
                    return

    def _look(self, url: str, jobs: list[tuple[str, str]], strict: bool = False) -> list[str]:
        """Start a watch of each running job of ``url`` not watched yet; their names.
        ``strict`` (the first look): a job that cannot be watched raises (a cluster bpmon does
        not support, say), as a single ``--monitor-flink`` job always did."""
        started = []
        for job_id, name in jobs:
            if job_id in self._seen[url] or (
                self.job is not None and self.job not in (job_id, name)
            ):
                continue
            try:
                started.append(self.watches.start_flink(url, job=job_id, label=self._labels[url]))
            except AlreadyWatchedError:
                continue  # its previous watch (same name) is still ending: next time
            except BpmonError as exc:  # gone or not running yet: next time, if it still runs
                if strict:
                    raise
                _log.warning("Flink job %s (%s) at %s: %s", name, job_id, url, exc)
                continue
            self._seen[url].add(job_id)
        return started
