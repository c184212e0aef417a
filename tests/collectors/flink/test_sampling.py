"""Flink's sampler where the real cluster cannot easily be made to misbehave: a graph cached
too long to be refreshed, one that never comes fresh, a sampler that answers disabled; and the
metric store's stale answers. Flink's HTTP layer is stood in for by ``fake_flink.py`` (its
answers are the shapes ``fixtures/flamegraph-slow-map.json`` recorded); bpmon's client, parsing
and classification run as against a cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from bpmon.collectors.flink.burst import version_tuple
from bpmon.collectors.flink.config import FlinkClusterConfig
from bpmon.collectors.flink.dumps import Tally
from bpmon.collectors.flink.flame import FlameSampler, FlameUnavailableError
from bpmon.collectors.flink.readings import FRESH_TRIES, Readings
from bpmon.collectors.flink.rest import FlinkRest
from bpmon.collectors.profile import StackClassifier, load_profile

from .fake_flink import Script, serving

FIXTURE = Path(__file__).with_name("fixtures") / "flamegraph-slow-map.json"
PATH = "/jobs/j/vertices/v/flamegraph"
QUICK = FlinkClusterConfig(flamegraph=True, flame_samples=4, flame_delay_ms=10, flame_refresh_s=60)
"""Flink's sampler taking 4 samples 10 ms apart (a test's burst, not a user's)."""


def recorded(name: str, end_ms: int) -> dict[str, Any]:
    """A recorded graph, as if it had ended at ``end_ms``."""
    answers = json.loads(FIXTURE.read_text())["answers"]
    return {**answers[name], "endTimestamp": end_ms}


def now_ms(offset_s: float = 0.0) -> int:
    return int((time.time() + offset_s) * 1000)


def sampler(url: str, config: FlinkClusterConfig = QUICK) -> FlameSampler:
    return FlameSampler(FlinkRest(url), config, "j", slack_s=0.5)


def tally() -> Tally:
    return Tally(StackClassifier(load_profile("flink-jvm")), {})


def test_a_fresh_graph_is_waited_for_and_counted() -> None:
    """Sampling (-3) at first, then the graph: enrich's 100 samples, all busy."""
    script = Script({PATH: (200, recorded("enrich[1]", now_ms(60)))})
    script.queued[PATH] = [(200, {"endTimestamp": -3})]
    with serving(script) as url:
        flame, counts = sampler(url), tally()
        pending = flame.start([("v", "enrich", (0,))])
        taken = flame.collect(pending, counts)
    assert taken == {("v", 0): 100}
    assert counts.counts(("v", 0), None).busy == 100


def test_the_cached_graph_served_first_is_never_counted() -> None:
    """The first answer is a cached graph (its refresh interval passed: a request samples
    anew); the sink's mailbox waits of the next, newer one are counted, not its sleeps."""
    script = Script({PATH: (200, recorded("sink: Writer", now_ms(0.5)))})
    cached = recorded("enrich[1]", now_ms(-61))  # one graph served twice: the same end
    script.queued[PATH] = [(200, cached), (200, cached)]
    with serving(script) as url:
        flame, counts = sampler(url), tally()
        pending = flame.start([("v", "sink", (0,))])
        flame.collect(pending, counts)
    c = counts.counts(("v", 0), None)
    assert (c.busy, c.idle) == (0, 100)


def test_a_graph_cached_for_longer_than_a_window_can_wait_is_thread_dumps() -> None:
    """Flink's default refresh interval (60 s): a graph 5 s old is served 55 s more."""
    script = Script({PATH: (200, recorded("enrich[1]", now_ms(-5)))})
    with serving(script) as url, pytest.raises(FlameUnavailableError) as err:
        sampler(url).start([("v", "enrich", (0,))])
    assert "rest.flamegraph.refresh-interval (60 s)" in err.value.reason
    assert not err.value.lasting


def test_a_graph_that_never_comes_fresh_is_given_up() -> None:
    script = Script({PATH: (200, recorded("enrich[1]", now_ms(-1.9)))})
    config = FlinkClusterConfig(
        flamegraph=True, flame_samples=4, flame_delay_ms=10, flame_refresh_s=2
    )
    with serving(script) as url:
        flame = sampler(url, config)
        pending = flame.start([("v", "enrich", (0,))])
        with pytest.raises(FlameUnavailableError, match="no fresh flame graph of enrich"):
            flame.collect(pending, tally())


class SlowReads(FlinkRest):
    """A client whose every per-subtask read takes ``each_s`` of a fake clock, as 128 requests
    of a vertex of 128 subtasks take seconds of a real one."""

    def __init__(self, url: str, each_s: float) -> None:
        super().__init__(url)
        self.now, self.each_s = 0.0, each_s

    def get(self, path: str, query: dict[str, str] | None = None, *, retry: bool = True) -> Any:
        if query and "subtaskindex" in query:
            self.now += self.each_s
        return super().get(path, query, retry=retry)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_reading_a_wide_vertexs_subtasks_does_not_spend_the_next_vertexs_slack() -> None:
    """A vertex of 20 subtasks read first (2 s of requests), the next vertex's graph fresh one
    poll later: within its 0.5 s of slack, since bpmon's own reading is not Flink's lateness
    (a job of 500 subtasks fell back to thread dumps on this)."""
    other = "/jobs/j/vertices/w/flamegraph"
    script = Script(
        {
            PATH: (200, recorded("enrich[1]", now_ms(60))),
            other: (200, recorded("enrich[1]", now_ms(60))),
        }
    )
    sampling = (200, {"endTimestamp": -3})  # Flink still sampling: no graph yet
    script.queued[PATH] = [sampling]
    script.queued[other] = [sampling, sampling]
    with serving(script) as url:
        rest = SlowReads(url, 0.1)
        flame = FlameSampler(
            rest, QUICK, "j", clock=lambda: rest.now, sleep=rest.sleep, slack_s=0.5
        )
        pending = flame.start([("v", "wide", tuple(range(20))), ("w", "next", (0,))])
        taken = flame.collect(pending, tally())
    assert rest.now > 2.0  # the wide vertex's reads took longer than the slack
    assert len(taken) == 21 and taken[("w", 0)] == 100, taken


def test_a_sampler_that_answers_disabled_is_off_for_the_watch() -> None:
    script = Script({PATH: (200, {"endTimestamp": -2})})
    with serving(script) as url, pytest.raises(FlameUnavailableError) as err:
        sampler(url).start([("v", "enrich", (0,))])
    assert err.value.lasting and "rest.flamegraph.enabled" in err.value.reason


def test_versions() -> None:
    assert version_tuple("2.3.0") >= (1, 18) > version_tuple("1.17.2")
    assert version_tuple("1.17-SNAPSHOT") == (1, 17)


class Store:
    """Flink's REST metric store as its fetcher behaves: a request that finds the last refresh
    older than the interval starts one, which lands ``lag_s`` later; the request itself is
    answered from the store as it was."""

    def __init__(self, interval_s: float, lag_s: float = 0.05) -> None:
        self.now, self.interval_s, self.lag_s = 100.0, interval_s, lag_s
        self.fetched_at, self.landing = 0.0, None  # last refresh: long ago
        self.requests = 0

    def read(self) -> dict[str, dict[str, float]]:
        self.requests += 1
        if self.landing is not None and self.now >= self.landing:
            self.fetched_at, self.landing = self.landing, None
        values = {"v": {"0.numRecordsIn": self.fetched_at * 1000}}
        if self.landing is None and self.now - self.fetched_at > self.interval_s:
            self.landing = self.now + self.lag_s
        return values

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_stale_answer_is_read_again() -> None:
    """After a quiet spell the first answer is 100 s old: read again, it is fresh."""
    store = Store(interval_s=10.0)
    readings = Readings(store.read, 10.0, clock=lambda: store.now, sleep=store.sleep)
    first = readings.read()
    assert first.reread and first.values["v"]["0.numRecordsIn"] == pytest.approx(100_050)


def test_an_answer_within_the_interval_is_not_read_again() -> None:
    store = Store(interval_s=10.0)
    readings = Readings(store.read, 10.0, clock=lambda: store.now, sleep=store.sleep)
    readings.read()
    store.sleep(3.0)
    before = store.requests
    second = readings.read()
    assert not second.reread and store.requests == before + 1


def test_a_store_that_does_not_change_is_read_a_bounded_number_of_times() -> None:
    values = {"v": {"0.numRecordsIn": 1.0}}
    calls: list[float] = []
    readings = Readings(lambda: calls.append(0) or values, 1.0, sleep=lambda s: None)
    assert not readings.read().reread
    assert len(calls) == 1 + FRESH_TRIES


def test_a_windows_second_reading_waits_for_the_next_refresh() -> None:
    store = Store(interval_s=1.0)
    readings = Readings(store.read, 1.0, clock=lambda: store.now, sleep=store.sleep)
    first = readings.read()
    store.sleep(0.3)  # a short window
    second = readings.after()
    assert second.at - first.at >= 1.0
    assert second.values != first.values


def test_a_quiet_span_is_three_seconds_of_the_stores_refreshes() -> None:
    """Shorter, an idle stretch under way at a reading (busy for Flink until it ends) moves
    the busy share of subtasks that idle in step by a third."""
    store = Store(interval_s=1.0)
    readings = Readings(store.read, 1.0, clock=lambda: store.now, sleep=store.sleep)
    previous = readings.read()
    store.sleep(1.5)  # the previous window ended 1.5 s ago: too short a span
    start, end = readings.quiet_span(previous)
    assert start is not previous
    spanned_ms = end.values["v"]["0.numRecordsIn"] - start.values["v"]["0.numRecordsIn"]
    assert spanned_ms >= 3000
    store.sleep(4.0)  # 4 s since: that span will do
    assert readings.quiet_span(end)[0] is end
