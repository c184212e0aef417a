"""Finishing time and spilled bytes of one bounded job under four exchanges at three slot counts.

The FLIP-235 claims, measured on bpmon's runtime: with fewer slots than the job's parallelism a
pipelined job waits for slots and fails (Flink's ``NoResourceAvailableException`` after the slot
request timeout), a blocking job runs region by region, and a hybrid job runs and finishes; with
enough slots hybrid finishes about as fast as pipelined and faster than blocking; selective
spilling writes far less to disk than full spilling.

The job, on 3 task managers: ``source`` (3 subtasks, 5,000 records/s each, 5,000 records each) ->
``work`` (3 subtasks, 150 us per record) -> ``sink`` (3 subtasks, 20 us), both edges rebalance
with the exchange under test. Each operator is its own slot sharing group: Flink shares no slots
in hybrid mode, and the comparison gives every exchange the same slots. The pipelined job runs in
streaming mode, as one region that needs all 9 slots at once (in batch mode bpmon, as Flink,
turns a pipelined edge between two slot sharing groups blocking); the others run in batch mode,
one region per operator of 3 slots each. The slot counts are 3, 6 and 9 (1, 2 and 3 slots per
task manager). A configuration that cannot get its slots fails after a 2 s slot request timeout
instead of Flink's 5 minutes.

Each configuration runs once, one after the other (the machine has 2 shared cores: figures vary
by some tens of percent between runs; the ratios are what to read). The last line is a JSON object
of the figures.

    .venv/bin/python tests/benchmarks/bench_shuffle.py [--records 5000]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario

EXCHANGES = ("pipelined", "blocking", "hybrid-selective", "hybrid-full")
SLOTS_PER_TASK_MANAGER = (1, 2, 3)
TASK_MANAGERS = 3
TIMEOUT_S = 2.0
LIMIT_S = 60.0


def scenario_text(exchange: str, slots_per_tm: int, records: int) -> str:
    """The bounded job with ``exchange`` on both edges and ``slots_per_tm`` slots per TM."""
    mode = "streaming" if exchange == "pipelined" else "batch"
    return f"""
name = "shuffle-{exchange}-{slots_per_tm}"
mode = "{mode}"
[network]
task_managers = {TASK_MANAGERS}
[cluster]
slots_per_task_manager = {slots_per_tm}
slot_request_timeout_s = {TIMEOUT_S}
[[operators]]
name = "source"
kind = "source"
parallelism = 3
rate = 5000
records = {records}
slot_sharing_group = "source"
[[operators]]
name = "work"
kind = "map"
parallelism = 3
cost_us = 150
slot_sharing_group = "work"
inputs = [{{ from = "source", partitioner = "rebalance", exchange = "{exchange}" }}]
[[operators]]
name = "sink"
kind = "sink"
parallelism = 3
cost_us = 20
slot_sharing_group = "sink"
inputs = [{{ from = "work", partitioner = "rebalance", exchange = "{exchange}" }}]
"""


def run_one(exchange: str, slots_per_tm: int, records: int) -> dict[str, Any]:
    """Run one configuration to its end; its outcome, finishing time and bytes spilled."""
    job = Job(parse_scenario(scenario_text(exchange, slots_per_tm, records)))
    began = time.monotonic()
    job.start()
    while not (job.finished or job.failed) and time.monotonic() - began < LIMIT_S:
        job.wait(0.02)
    elapsed = time.monotonic() - began
    partitions = [o.partition for tasks in job.tasks.values() for t in tasks for o in t.outputs]
    spilled = sum(p.spill_counters().written_bytes for p in partitions)
    read = sum(p.spill_counters().read_bytes for p in partitions)
    sink_records = sum(t.records_in.total for t in job.tasks["sink"])
    result = job.stop()
    if result.leaks:
        raise SystemExit(f"{exchange} x {slots_per_tm}: leaks {result.leaks}")
    return {
        "exchange": exchange,
        "slots": TASK_MANAGERS * slots_per_tm,
        "state": result.state,
        "seconds": round(elapsed, 2),
        "spilled_mb": round(spilled / 1e6, 2),
        "read_back_mb": round(read / 1e6, 2),
        "records_at_sink": int(sink_records),
        "error": (result.error or "")[:90] or None,
    }


def table(results: list[dict[str, Any]]) -> str:
    """Exchanges as rows, slot counts as columns: seconds (or failed) and MB spilled."""
    slots = [TASK_MANAGERS * s for s in SLOTS_PER_TASK_MANAGER]
    lines = [f"{'exchange':<18}" + "".join(f"{f'{n} slots':>24}" for n in slots)]
    for exchange in EXCHANGES:
        cells = []
        for n in slots:
            r = next(r for r in results if (r["exchange"], r["slots"]) == (exchange, n))
            shown = (
                f"{r['seconds']:.2f} s, {r['spilled_mb']:.1f} MB"
                if r["state"] == "finished"
                else f"{r['state']} ({r['seconds']:.1f} s)"
            )
            cells.append(f"{shown:>24}")
        lines.append(f"{exchange:<18}" + "".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000, help="records per source subtask")
    args = parser.parse_args()
    results = [
        run_one(exchange, slots, args.records)
        for slots in SLOTS_PER_TASK_MANAGER
        for exchange in EXCHANGES
    ]
    print(table(results))
    by = {(r["exchange"], r["slots"]): r for r in results}
    few, many = (
        TASK_MANAGERS * SLOTS_PER_TASK_MANAGER[0],
        TASK_MANAGERS * SLOTS_PER_TASK_MANAGER[-1],
    )
    claims = {
        "few_slots_pipelined_fails": by[("pipelined", few)]["state"] == "failed",
        "few_slots_blocking_finishes": by[("blocking", few)]["state"] == "finished",
        "few_slots_hybrid_finishes": by[("hybrid-selective", few)]["state"] == "finished",
        "enough_slots_hybrid_over_pipelined": round(
            by[("hybrid-selective", many)]["seconds"] / by[("pipelined", many)]["seconds"], 2
        ),
        "enough_slots_blocking_over_hybrid": round(
            by[("blocking", many)]["seconds"] / by[("hybrid-selective", many)]["seconds"], 2
        ),
        "enough_slots_spilled_selective_mb": by[("hybrid-selective", many)]["spilled_mb"],
        "enough_slots_spilled_full_mb": by[("hybrid-full", many)]["spilled_mb"],
    }
    print(
        json.dumps(
            {"bench": "shuffle", "records": args.records, "results": results, "claims": claims}
        )
    )


if __name__ == "__main__":
    main()
