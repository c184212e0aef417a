"""The network environment: settings checked up front, placement, sizing, teardown."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import pytest

from bpmon.model.errors import ConfigError, InsufficientBuffersError, WaitCancelledError
from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.gate import LocalInputChannel
from bpmon.runtime.network import NetworkEnvironment
from bpmon.scenario import NetworkConfig

Env = Callable[..., NetworkEnvironment]


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("segment_size", 128, "segment_size = 128: a segment holds at least 256 bytes"),
        ("buffers_per_channel", 0, "buffers_per_channel = 0: must be at least 1"),
        ("floating_buffers_per_gate", -1, "floating_buffers_per_gate = -1: must be at least 1"),
        ("task_managers", 0, "task_managers = 0: must be at least 1"),
        ("max_overdraft_buffers_per_gate", -2, "max_overdraft_buffers_per_gate = -2: must be 0"),
        ("link_bandwidth_mb_s", -1.0, "link_bandwidth_mb_s = -1.0: must be 0 or more"),
        ("flow_control", "udp", 'flow_control = \'udp\': expected "credit" or "tcp"'),
        ("total_buffers", True, "total_buffers = True: expected a number"),
    ],
)
def test_bad_settings_name_the_value_and_the_fix(
    setting: str, value: object, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        NetworkConfig(**{setting: value})  # type: ignore[arg-type]
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_too_few_buffers_for_the_pools_fails_with_numbers(make_env: Env) -> None:
    env = make_env(task_managers=1, total_buffers=5)
    env.create_partition(0, 2, "a")  # min 3
    with pytest.raises(InsufficientBuffersError) as info:
        env.create_partition(0, 2, "b")  # 3 more: 6 needed, 5 exist
    assert "6 needed in all, 5 exist" in str(info.value)
    assert "network.total_buffers" in str(info.value)


def test_enough_buffers_when_total_is_zero(make_env: Env) -> None:
    env = make_env(task_managers=2)
    partition = env.create_partition(0, 4, "p")
    gates = [env.create_gate(tm, [(partition, tm)], f"g{tm}") for tm in (0, 1)]
    # every pool gets its maximum: 4*2+8 output; 8 floating per gate; 2 exclusive for the remote
    assert partition.pool.pool_size == 16
    assert all(gate.pool.pool_size == 8 for gate in gates)
    assert isinstance(gates[0].channels[0], LocalInputChannel)
    assert isinstance(gates[1].channels[0], RemoteInputChannel)
    assert gates[1].channels[0].available_exclusive == 2


def test_shutdown_mid_flight_returns_every_segment(make_env: Env) -> None:
    env = make_env(task_managers=2, segment_size=256)
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(1, [(partition, 0)], "g")

    def write() -> None:
        with contextlib.suppress(WaitCancelledError):
            for i in range(1000):
                partition.emit(i, 256, 0)

    blocked = threading.Thread(target=write, daemon=True)
    blocked.start()  # fills every buffer on both sides, then waits in the pool
    blocked.join(timeout=0.5)
    assert blocked.is_alive()
    with env.lock:
        held = gate.poll_next()  # the consumer holds one buffer across the shutdown
    env.shutdown()
    blocked.join(timeout=2.0)
    assert not blocked.is_alive()  # woken with WaitCancelledError
    assert held is not None
    with env.lock:
        held[0].recycle()  # type: ignore[union-attr]
    assert env.leaks() == []
