"""Reading the ``keys`` of a ``hash`` input: a Zipf distribution or a few hot keys' shares.

``keys = { count = 1000, zipf = 1.1 }`` or ``keys = { count = 50, hot = [0.3, 0.1] }``; the keys
are Java ints ``0 .. count-1`` routed by Flink's key groups (``runtime/keygroups.py``).
"""

from __future__ import annotations

import math

from bpmon.scenario._table import Table, type_name
from bpmon.scenario.spec import KeySpec

KEYS_KEYS = ("count", "zipf", "hot")
KEYS_EXAMPLE = "keys = { count = 1000, zipf = 1.1 } or keys = { count = 50, hot = [0.3, 0.1] }"
MAX_KEYS = 100_000
"""The most keys a distribution may have: the runtime hashes every key once when a job starts
(about a second per 300,000 keys in Python), and 100,000 keys already spread a Zipf tail over
every key group of the largest maximum parallelism that matters here."""
_SUM_SLACK = 1e-6
"""How far from 1 the shares of every key may sum (decimal fractions do not add up exactly)."""


def read_keys(table: Table) -> KeySpec | None:
    """The ``keys`` inline table of an input, checked; None when absent."""
    data = table.table("keys")
    if data is None:
        return None
    keys = Table(data, f"{table.where}: keys")
    keys.check_keys(KEYS_KEYS)
    count = keys.require("count", keys.integer("count", minimum=1), "the number of keys, e.g. 1000")
    if count > MAX_KEYS:
        raise keys.key_error("count", f"a number of keys from 1 to {MAX_KEYS:,}")
    zipf = keys.number("zipf", 0.0)
    has_hot = keys.has("hot")
    if (zipf is None) == (not has_hot):
        raise keys.error(f'expected exactly one of "zipf" and "hot", e.g. {KEYS_EXAMPLE}')
    if zipf is not None:
        return KeySpec(count=count, zipf=zipf)
    return KeySpec(count=count, hot=_read_hot(keys, count))


def _read_hot(keys: Table, count: int) -> tuple[float, ...]:
    """``hot``: the first keys' shares, each in (0, 1], leaving some for the other keys."""
    value = keys.data["hot"]
    expected = "a list of shares of the first keys, e.g. [0.3, 0.1]"
    if not isinstance(value, list) or not value:
        raise keys.key_error("hot", f"{expected}, got {type_name(value)}")
    shares: list[float] = []
    for share in value:
        if isinstance(share, bool) or not isinstance(share, int | float):
            raise keys.key_error("hot", f"{expected}, with numbers only")
        if not (math.isfinite(share) and 0 < share <= 1):
            raise keys.key_error("hot", f"{expected}, each share above 0 and at most 1")
        shares.append(float(share))
    if len(shares) > count:
        raise keys.key_error("hot", f"at most count = {count} shares (one per hot key)")
    total = sum(shares)
    if len(shares) < count and total >= 1 - _SUM_SLACK:
        raise keys.key_error(
            "hot", f"shares summing below 1 (they sum to {total:g}), the rest for the other keys"
        )
    if len(shares) == count and abs(total - 1) > _SUM_SLACK:
        raise keys.key_error("hot", f"shares of all {count} keys summing to 1 (got {total:g})")
    return tuple(shares)
