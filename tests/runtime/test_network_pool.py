"""NetworkBufferPool: Flink's minimums, redistribution by headroom, and clear errors when short."""

from __future__ import annotations

import pytest

from bpmon.model.errors import InsufficientBuffersError
from bpmon.runtime.network_pool import NetworkBufferPool


def test_pool_gets_its_minimum_and_shares_the_rest_by_headroom() -> None:
    # 20 segments; pools (min 2, max 12) and (min 3, max 8): 15 spare, headroom 10 and 5.
    network = NetworkBufferPool(20, 1024)
    with network.lock:
        a = network.create_pool(2, 12)
        b = network.create_pool(3, 8)
        # 15 spare shared 10:5 -> a gets 2 + 10, b gets 3 + 5: both at their maximum.
        assert (a.pool_size, b.pool_size) == (12, 8)
        c = network.create_pool(4, 14)
        # spare = 20 - 9 = 11, headroom 10, 5, 10 -> cumulative floors 4, 6, 11 -> 4, 2, 5.
        assert (a.pool_size, b.pool_size, c.pool_size) == (6, 5, 9)
        c.destroy()
        assert (a.pool_size, b.pool_size) == (12, 8)


def test_insufficient_buffers_names_the_numbers_and_the_setting() -> None:
    network = NetworkBufferPool(10, 1024, name="tm-1")
    with network.lock:
        network.create_pool(6, 6)
        with pytest.raises(InsufficientBuffersError) as info:
            network.create_pool(5, 9, owner="map (1/2) -> sink")
    message = str(info.value)
    assert "11 needed" in message and "10 exist" in message
    assert "network.total_buffers" in message and "map (1/2) -> sink" in message


def test_exclusive_buffers_beyond_the_pool_fail_clearly() -> None:
    network = NetworkBufferPool(3, 1024)
    with network.lock, pytest.raises(InsufficientBuffersError, match="total_buffers"):
        network.request_unpooled(4, "gate[0]")
