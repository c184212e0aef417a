"""The network environment of one simulated cluster: task managers, pools, partitions, gates.

It owns the network lock, one ``NetworkBufferPool`` per task manager, the ``Connection`` of each
``ConnectionID`` (pair of task managers and connection index) its remote channels use, and
everything created through it, so that it can tear it all down and prove that nothing leaked:
every segment back in its global pool, no credit negative, no timer thread left.

Pool sizes follow Flink's (``docs/scenario.md``, ``[network]``): a result partition's pool has
min = subpartitions + 1 and max = subpartitions × buffers_per_channel + floating_buffers_per_gate,
with ``max_overdraft_buffers_per_gate`` overdraft; an input gate's floating pool has min 1 and max
floating_buffers_per_gate, plus buffers_per_channel exclusive buffers per remote channel. Under
``tcp`` (Flink before 1.5) there are neither exclusive nor floating buffers: the gate's one pool
holds buffers_per_channel buffers per remote channel, and a channel takes one from it for every
buffer it receives.

With ``total_buffers = 0`` each task manager's pool is "enough for the job": it grows by each pool's
maximum plus overdraft, and each channel's exclusive buffers, as they are created.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bpmon.runtime.blocking import BlockingSubpartition
from bpmon.runtime.connection import Connection, ConnectionID, Link, LinkTimer
from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.gate import InputGate, LocalInputChannel
from bpmon.runtime.hybrid import HybridMemoryDataManager, HybridSubpartition
from bpmon.runtime.network_pool import NetworkBufferPool
from bpmon.runtime.partition import ResultPartition, SubpartitionFactory
from bpmon.runtime.spill import SpillFile
from bpmon.runtime.subpartition import ResultSubpartition
from bpmon.scenario import Exchange, NetworkConfig


class NetworkEnvironment:
    """Creates and owns the network stack of one job on ``config.task_managers`` task managers.

    Args:
        config: the ``[network]`` settings.
        clock: monotonic seconds (the link timer and bandwidth cap use it).
    """

    def __init__(
        self,
        config: NetworkConfig,
        clock: Callable[[], float] = time.monotonic,
        spill_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.spill_dir = spill_dir
        """Where blocking and hybrid partitions write their files (the job owns and removes it)."""
        self.lock = threading.Lock()
        self._elastic = config.total_buffers == 0
        self.pools = [
            NetworkBufferPool(config.total_buffers, config.segment_size, f"tm-{tm}", self.lock)
            for tm in range(config.task_managers)
        ]
        self._clock = clock
        self._timer = LinkTimer(self.lock, clock, "bpmon-link-timer")
        self.connections: dict[ConnectionID, Connection] = {}
        self._links: dict[tuple[int, int], Link] = {}
        self.partitions: list[ResultPartition] = []
        self.gates: list[InputGate] = []
        self._tm_of_partition: dict[int, int] = {}
        self.closed = False

    def new_condition(self) -> threading.Condition:
        """A condition on the network lock (a task's mailbox waits on one)."""
        return threading.Condition(self.lock)

    # -- building ---------------------------------------------------------------------------

    def create_partition(
        self,
        tm: int,
        num_subpartitions: int,
        name: str,
        condition: threading.Condition | None = None,
        exchange: Exchange = "pipelined",
        *,
        overdraft: bool = True,
    ) -> ResultPartition:
        """A result partition on task manager ``tm`` with its Flink-sized pool.

        ``exchange`` picks its subpartitions: pipelined (in memory), blocking (a spill file each,
        under :attr:`spill_dir`) or hybrid (in memory and spilled, ``hybrid.py``).
        ``overdraft=False``: no overdraft buffers (a legacy source's partition, FLINK-27789).
        """
        cfg = self.config
        min_size = num_subpartitions + 1
        max_size = max(
            min_size, num_subpartitions * cfg.buffers_per_channel + cfg.floating_buffers_per_gate
        )
        pipelined = exchange == "pipelined"
        # Blocking and hybrid partitions hold no per-channel limit and lend no overdraft
        # buffers (Flink applies both to pipelined partitions only; FLINK-31288 for hybrid).
        lends = pipelined and overdraft
        overdraft_buffers = cfg.max_overdraft_buffers_per_gate if lends else 0
        with self.lock:
            global_pool = self._pool(tm, max_size + overdraft_buffers)
            pool = global_pool.create_pool(
                min_size,
                max_size,
                num_subpartitions=num_subpartitions,
                max_buffers_per_channel=cfg.max_buffers_per_channel if pipelined else 0,
                max_overdraft=overdraft_buffers,
                condition=condition,
                owner=name,
            )
            make = self._subpartitions(exchange, len(self.partitions))
            partition = ResultPartition(
                pool,
                num_subpartitions,
                cfg.segment_size,
                name,
                make,
                publish_on_flush=cfg.output_flush == "publish",
            )
            self.partitions.append(partition)
            self._tm_of_partition[id(partition)] = tm
        return partition

    def create_gate(
        self,
        tm: int,
        inputs: Sequence[tuple[ResultPartition, int]],
        name: str,
        condition: threading.Condition | None = None,
        connection_index: int = 0,
        requested: bool = True,
    ) -> InputGate:
        """An input gate on ``tm`` reading subpartition ``i`` of each ``(partition, i)``.

        Channels are local when the producer runs on the same task manager, remote otherwise; a
        remote channel from task manager ``src`` uses connection ``(src, tm, connection_index)``
        (the deployment gives the index of the gate's intermediate result under ``tcp``).
        ``requested=False``: its remote channels get nothing until
        :meth:`~bpmon.runtime.gate.InputGate.request_partitions` (the task starts).
        """
        cfg = self.config
        credit = cfg.flow_control == "credit"
        remote = [p for p, _ in inputs if self._tm_of_partition[id(p)] != tm]
        if credit:
            min_size, max_size = 1, cfg.floating_buffers_per_gate
            exclusive = len(remote) * cfg.buffers_per_channel
        else:  # legacy: no exclusive or floating buffers, one pool of buffers_per_channel each
            min_size = max_size = max(1, len(remote) * cfg.buffers_per_channel)
            exclusive = 0
        with self.lock:
            global_pool = self._pool(tm, max_size + exclusive)
            cond = condition or threading.Condition(self.lock)
            pool = global_pool.create_pool(min_size, max_size, condition=cond, owner=name)
            gate = InputGate(name, pool, cond)
            for index, (partition, sub) in enumerate(inputs):
                where = (tm, connection_index, requested)
                channel = self._channel(gate, index, partition, sub, *where)
                gate.channels.append(channel)
            self.gates.append(gate)
        return gate

    def _subpartitions(self, exchange: Exchange, number: int) -> SubpartitionFactory | None:
        """How partition ``number`` makes its subpartitions (None: pipelined)."""
        if exchange == "pipelined":
            return None
        folder = self.spill_dir
        if folder is None:
            raise ValueError(f"a {exchange} partition needs a spill directory; none was given")

        def blocking(partition: ResultPartition, index: int) -> ResultSubpartition:
            spill = SpillFile(folder / f"p{number}-s{index}.spill")
            return BlockingSubpartition(partition, index, spill)

        if exchange == "blocking":
            return blocking
        managers: list[HybridMemoryDataManager] = []

        def hybrid(partition: ResultPartition, index: int) -> ResultSubpartition:
            if not managers:  # one memory data manager per partition, made with its first view
                full = exchange == "hybrid-full"
                managers.append(HybridMemoryDataManager(partition, full=full, config=self.config))
                partition.on_segment_requested = managers[0].on_memory_usage_changed
            spill = SpillFile(folder / f"p{number}-s{index}.spill")
            return HybridSubpartition(partition, index, managers[0], spill)

        return hybrid

    def _pool(self, tm: int, grow_by: int) -> NetworkBufferPool:
        if not 0 <= tm < len(self.pools):
            raise ValueError(f"task manager {tm} does not exist (0..{len(self.pools) - 1})")
        pool = self.pools[tm]
        if self._elastic:
            pool.grow(grow_by)
        return pool

    def _channel(
        self,
        gate: InputGate,
        index: int,
        partition: ResultPartition,
        sub: int,
        tm: int,
        connection_index: int,
        requested: bool,
    ) -> LocalInputChannel | RemoteInputChannel:
        subpartition = partition.subpartitions[sub]
        src = self._tm_of_partition[id(partition)]
        if src == tm:
            return LocalInputChannel(gate, index, subpartition)
        credit = self.config.buffers_per_channel if self.config.flow_control == "credit" else 0
        channel = RemoteInputChannel(gate, index, self.pools[tm], credit)
        self.connection(src, tm, connection_index).register(subpartition, channel, requested)
        return channel

    def connection(self, src: int, dst: int, index: int = 0) -> Connection:
        """Connection ``index`` from task manager ``src`` to ``dst`` (created on first use)."""
        key = ConnectionID(src, dst, index)
        if key not in self.connections:
            cfg = self.config
            self.connections[key] = Connection(
                src,
                dst,
                credit_based=cfg.flow_control == "credit",
                link=self._links.setdefault((src, dst), Link(cfg.link_bandwidth_mb_s * 1e6)),
                segment_size=cfg.segment_size,
                clock=self._clock,
                timer=self._timer,
                index=index,
                latency=cfg.latency_ms / 1000,
            )
        return self.connections[key]

    def tm_of(self, partition: ResultPartition) -> int:
        """The task manager a partition was created on."""
        return self._tm_of_partition[id(partition)]

    # -- teardown ---------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Release every partition and gate and stop the link timer; idempotent.

        Call it once the task threads have stopped; a thread still waiting in a pool or a gate is
        woken (a pool raises ``WaitCancelledError``).
        """
        with self.lock:
            if self.closed:
                return
            self.closed = True
            for connection in self.connections.values():
                connection.close()
            for partition in self.partitions:
                partition.release()
            for gate in self.gates:
                gate.close()
        self._timer.stop()

    def leaks(self) -> list[str]:
        """What was not returned after :meth:`shutdown`: empty when everything is conserved."""
        problems: list[str] = []
        with self.lock:
            for pool in self.pools:
                missing = pool.total_segments - pool.available_segments
                if missing:
                    problems.append(
                        f"{pool.name}: {missing} of {pool.total_segments} segments not returned"
                    )
                if pool.pools:
                    problems.append(f"{pool.name}: {len(pool.pools)} local pools not destroyed")
            for partition in self.partitions:
                for sub in partition.subpartitions:
                    problems.extend(f"{partition.name}: {leak}" for leak in sub.leaks())
            for connection in self.connections.values():
                problems.extend(
                    f"connection {tuple(connection.id)}: negative credit {v.credit}"
                    for v in connection.views
                    if v.credit < 0
                )
        if self._timer.alive:
            problems.append("the link timer thread is still running")
        if self._timer.error is not None:
            problems.append(f"the link timer failed: {self._timer.error!r}")
        return problems
