"""The job the Prometheus tests expose: a map too slow for its two sources (job ``slowjob``)."""

from __future__ import annotations

BOTTLENECK = """
name = "slowjob"
[monitor]
warmup_s = 0.5
samples = 20
interval_ms = 10
[network]
segment_size = 1024
[[operators]]
name = "src"
kind = "source"
parallelism = 2
rate = 2000
[[operators]]
name = "work"
kind = "map"
parallelism = 2
cost_us = 5000
inputs = [{ from = "src", partitioner = "rebalance" }]
[[operators]]
name = "out"
kind = "sink"
inputs = [{ from = "work" }]
"""
"""Two sources offering 4,000 records/s to a map that does 400: src HIGH, work the root cause."""
