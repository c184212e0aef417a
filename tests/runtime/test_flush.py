"""``output_flush = "publish"``: a flush makes a slice readable and the writer keeps its buffer.

Flink's output flusher does not finish a partly filled buffer: the reader gets a slice of the bytes
written so far, the writer goes on filling the same segment until it is full, and the segment goes
back to the pool once the buffer is finished and every slice of it was recycled. That is the
default; ``"finish"`` finishes the buffer on each flush instead (less data in flight).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bpmon.model.errors import ConfigError
from bpmon.runtime.buffers import Buffer
from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.network import NetworkEnvironment
from bpmon.scenario import parse_scenario
from bpmon.scenario.network import NetworkConfig
from bpmon.service.facade import Settings, drain, run_scenario
from tests.waiting import wait_until

Env = Callable[..., NetworkEnvironment]


def _take(env: NetworkEnvironment, gate: object) -> Buffer:
    with env.lock:
        polled = gate.poll_next()  # type: ignore[attr-defined]
    assert polled is not None and isinstance(polled[0], Buffer)
    return polled[0]


def test_a_flush_publishes_a_slice_and_the_open_buffer_keeps_its_segment(make_env: Env) -> None:
    env = make_env(task_managers=1, segment_size=1000, output_flush="publish")
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(0, [(partition, 0)], "g")
    emit = partition.writer(300)
    emit("a", 0)
    partition.flush_all()
    first = _take(env, gate)
    assert (first.records, first.size) == (["a"], 300)
    with env.lock:
        first.recycle()
        assert partition.pool.used == 1  # the open buffer still holds its segment
    emit("b", 0)
    emit("c", 0)
    emit("d", 0)  # 1200 bytes: the first buffer is full, "d" ends in the second
    second = _take(env, gate)
    assert (second.records, second.size, second.segment) == (["b", "c"], 700, first.segment)
    with env.lock:
        assert partition.pool.used == 2  # the full one (a slice still read) and the next one
        second.recycle()
        assert partition.pool.used == 1  # finished and every slice recycled: back in the pool
    assert partition.builder_bytes(0) == 200 and partition.unpublished_bytes(0) == 200


def test_bytes_flushed_twice_before_a_read_arrive_as_one_buffer(make_env: Env) -> None:
    env = make_env(task_managers=1, segment_size=1000, output_flush="publish")
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(0, [(partition, 0)], "g")
    emit = partition.writer(100)
    emit(1, 0)
    assert partition.backlog(0) == 0  # written, not flushed: nothing to announce
    partition.flush_all()
    emit(2, 0)
    partition.flush_all()
    assert partition.backlog(0) == 1  # one readable buffer, as Flink's backlog counts it
    slice_ = _take(env, gate)
    assert (slice_.records, slice_.size) == ([1, 2], 200)
    assert partition.backlog(0) == 0
    with env.lock:
        slice_.recycle()


def test_finish_mode_seals_the_buffer_on_every_flush(make_env: Env) -> None:
    env = make_env(task_managers=1, segment_size=1000, output_flush="finish")
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(0, [(partition, 0)], "g")
    partition.writer(100)(1, 0)
    partition.flush_all()
    buffer = _take(env, gate)
    with env.lock:
        buffer.recycle()
        assert partition.pool.used == 0
    assert partition.builder_bytes(0) == 0


@pytest.mark.parametrize(("mode", "segments"), [("finish", 10), ("publish", 1)])
def test_publishing_holds_more_bytes_in_flight_per_segment(
    make_env: Env, mode: str, segments: int
) -> None:
    """Ten flushes of 100 bytes, nothing read: one segment per flush, or one for all ten."""
    env = make_env(task_managers=1, segment_size=1000, output_flush=mode)
    partition = env.create_partition(0, 1, "p")
    env.create_gate(0, [(partition, 0)], "g")
    emit = partition.writer(100)
    for i in range(10):
        emit(i, 0)
        partition.flush_all()
    with env.lock:
        assert partition.pool.used == segments
        assert partition.subpartitions[0].queued_bytes + partition.unpublished_bytes(0) == 1000


def test_each_slice_travels_as_one_credited_buffer_to_a_remote_channel(make_env: Env) -> None:
    env = make_env(task_managers=2, segment_size=1000, output_flush="publish")
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(1, [(partition, 0)], "g")
    channel = gate.channels[0]
    assert isinstance(channel, RemoteInputChannel)
    emit = partition.writer(100)
    for expected in (1, 2):
        emit(expected, 0)
        partition.flush_all()
        wait_until(lambda n=expected: channel.queue_length() >= n, f"slice {expected} to arrive")
        assert channel.queue_length() == expected
    with env.lock:
        assert partition.pool.used == 1  # both slices were copied out; the buffer stays open
    taken = [_take(env, gate) for _ in range(2)]  # one receiver buffer (one credit) per slice
    assert [(b.records, b.size) for b in taken] == [([1], 100), ([2], 100)]
    assert len({b.segment for b in taken}) == 2
    with env.lock:
        for b in taken:
            b.recycle()


def test_a_bad_output_flush_names_the_choices() -> None:
    with pytest.raises(
        ConfigError, match=r"output_flush = 'slice': expected \"finish\" or \"publish\""
    ):
        NetworkConfig(output_flush="slice")  # type: ignore[arg-type]


JOB = """
name = "publish"
[network]
output_flush = "publish"
segment_size = 4096
{extra}
[monitor]
warmup_s = 0.3
samples = 10
interval_ms = 20
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 300
{records}
[[operators]]
name = "map"
kind = "map"
parallelism = 2
cost_us = 100
inputs = [{{ from = "source", partitioner = "rebalance"{exchange} }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "map", partitioner = "rebalance" }}]
"""


def test_the_open_buffers_count_in_out_pool_usage_and_the_job_ends_without_leaks(
    tmp_path: Path,
) -> None:
    """The open buffers count (Flink's 0.10 for a light operator), more than finishing them."""
    usage: dict[str, float] = {}
    for mode in ("finish", "publish"):
        # 5 records/s per subtask: a subpartition gets one every 400 ms and a flush every 100 ms,
        # so a finished buffer leaves its subpartition without a segment most of the time
        text = (
            JOB.format(extra="", records="", exchange="")
            .replace('output_flush = "publish"', f'output_flush = "{mode}"')
            .replace("rate = 300", "rate = 5")
            .replace("warmup_s = 0.3", "warmup_s = 1.0")
        )
        settings = Settings(runs_dir=tmp_path / mode)
        ended = drain(run_scenario(parse_scenario(text), settings, duration_s=1.5))
        assert ended.leaks == ()
        source = {v.name: v for v in ended.reports[0].vertices}["source"]
        assert source.metrics.out_pool_usage is not None
        usage[mode] = source.metrics.out_pool_usage
    # publish: each source subtask always holds one open buffer per subpartition (2 of 12)
    assert usage["publish"] == pytest.approx(2 / 12, abs=0.01), usage
    assert usage["publish"] > usage["finish"], usage


@pytest.mark.parametrize("exchange", ["blocking", "hybrid-selective"])
def test_batch_exchanges_still_finish_on_flush_and_return_every_buffer(
    tmp_path: Path, exchange: str
) -> None:
    text = JOB.format(
        extra="", records="records = 600", exchange=f', exchange = "{exchange}"'
    ).replace('name = "publish"', 'name = "publish"\nmode = "batch"')
    ended = drain(run_scenario(parse_scenario(text), Settings(runs_dir=tmp_path), duration_s=5.0))
    assert ended.leaks == ()
