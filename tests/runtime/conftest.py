"""Fixtures for the runtime tests: network environments that are proven leak-free at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.gate import InputGate
from bpmon.runtime.network import NetworkEnvironment
from bpmon.scenario import NetworkConfig


@pytest.fixture
def make_env() -> Iterator[Callable[..., NetworkEnvironment]]:
    """Build ``NetworkEnvironment(NetworkConfig(**settings))``; each is shut down and checked."""
    made: list[NetworkEnvironment] = []

    def build(**settings: Any) -> NetworkEnvironment:
        env = NetworkEnvironment(NetworkConfig(**settings))
        made.append(env)
        return env

    yield build
    for env in made:
        env.shutdown()
        assert env.leaks() == []


Drain = Callable[[NetworkEnvironment, InputGate], tuple[list[object], list[int]]]


@pytest.fixture
def drain() -> Drain:
    """``drain(env, gate)``: read everything the gate has now, recycling the buffers."""
    return read_all


def read_all(env: NetworkEnvironment, gate: InputGate) -> tuple[list[object], list[int]]:
    """Read everything the gate has now: (records, buffer sizes); buffers are recycled."""
    records: list[object] = []
    sizes: list[int] = []
    with env.lock:
        while (polled := gate.poll_next()) is not None:
            item = polled[0]
            if isinstance(item, Buffer):
                records.extend(item.records)
                sizes.append(item.size)
                item.recycle()
    return records, sizes
