"""Noisy service times: each record's cost drawn around the operator's ``cost_us``.

A real operator's time per record varies (garbage collection, cache misses, record sizes). With
``cost_cv`` set, every record's cost is drawn from a log-normal distribution whose mean is the
subtask's cost per record (``slow_subtasks`` applied) and whose coefficient of variation is
``cost_cv``: ``sigma² = ln(1 + cv²)`` and ``mu = ln(mean) - sigma² / 2``, so the mean is kept
exactly and the capacity of a subtask is still ``1 / cost`` on average. Each subtask draws from
its own generator seeded by the scenario's ``seed``, the operator and the subtask index, so two
runs of a scenario draw the same costs.
"""

from __future__ import annotations

import math
import random


class CostNoise:
    """Draws the service time of a number of records, one log-normal draw per record.

    Owned by one task thread (its generator is not shared).
    """

    __slots__ = ("_gauss", "_mu", "_sigma")

    def __init__(self, cost_s: float, cv: float, rng: random.Random) -> None:
        """Costs of mean ``cost_s`` seconds (> 0) and coefficient of variation ``cv`` (> 0)."""
        if not (cost_s > 0 and cv > 0):
            raise ValueError(f"CostNoise: cost_s and cv must be > 0, got {cost_s}, {cv}")
        variance = math.log1p(cv * cv)
        self._sigma = math.sqrt(variance)
        self._mu = math.log(cost_s) - variance / 2
        self._gauss = rng.gauss

    def seconds(self, records: int) -> float:
        """The service time of ``records`` records: the sum of one draw per record."""
        gauss, mu, sigma, exp = self._gauss, self._mu, self._sigma, math.exp
        return sum(exp(gauss(mu, sigma)) for _ in range(records))


def cost_noise(cost_us: float, cv: float, seed: int, vertex: str, index: int) -> CostNoise | None:
    """The noise of one subtask's (or chain member's) costs; None when its costs are constant
    (``cv`` 0, or records that cost nothing)."""
    if cv <= 0 or cost_us <= 0:
        return None
    return CostNoise(cost_us / 1_000_000, cv, random.Random(f"{seed}/cost/{vertex}/{index}"))
