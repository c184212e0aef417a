"""Buffer debloating on: the ``debloating`` finding, with the sizes the gates chose, and the same
verdict as with it off.

The job is the corpus's ``checkpoints-debloated-behind-hash`` (its arithmetic in the file: 200-byte
records, enrich 2 x 2 ms after a hash exchange reading ~100 KB/s a subtask, so each gate's buffers
shrink from 32 KiB to a few KB), run on the real runtime with debloating on and off.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.model.values import Observation, TargetSettings
from bpmon.rules.debloat import debloat_finding
from bpmon.rules.engine import diagnose
from bpmon.scenario import load_scenario

from .observations import observation, sub, vertex

CASE = Path(__file__).resolve().parents[1] / "benchmarks" / "corpus"
DEBLOATED = CASE / "checkpoints-debloated-behind-hash.toml"


def test_no_finding_when_debloating_is_off_or_unknown() -> None:
    job = observation(vertex("src", sub(0)))
    assert debloat_finding(job) is None
    assert debloat_finding(replace(job, settings=TargetSettings(debloat=False))) is None


def test_debloating_without_sizes_says_they_were_not_shown() -> None:
    job = observation(vertex("src", sub(0)), settings=TargetSettings(debloat=True))
    finding = debloat_finding(job)
    assert finding is not None and finding.vertex == "job"
    assert "not shown" in finding.detail and "about the target's worth" in finding.detail


def sizes_in(detail: str) -> list[float]:
    """The byte sizes a finding's detail quotes (``now 4,100-5,200 bytes``)."""
    found = re.search(r"now ([\d,]+)(?:-([\d,]+))? bytes", detail)
    assert found is not None, detail
    return [float(g.replace(",", "")) for g in found.groups() if g is not None]


def observe(path: Path, debloat: bool) -> Observation:
    scenario = load_scenario(path)
    scenario = replace(scenario, network=replace(scenario.network, debloat=debloat))
    target = RuntimeTarget(scenario)
    target.start()
    try:
        target.wait(scenario.monitor.warmup_s)
        seen = target.observe(samples=40, interval_ms=50)
    finally:
        ending = target.stop()
    assert ending.leaks == ()
    return seen


@pytest.mark.slow
def test_a_debloated_job_keeps_its_verdict_and_says_its_buffer_sizes() -> None:
    on = observe(DEBLOATED, debloat=True)
    report = diagnose(on)
    [finding] = [f for f in report.findings if f.kind == "debloating"]
    sizes = [
        s.metrics.buffer_size
        for v in on.vertices
        for s in v.subtasks
        if s.metrics.buffer_size is not None
    ]
    assert sizes, "the runtime showed no debloated buffer size"
    quoted = sizes_in(finding.detail)
    assert quoted[0] == min(sizes) and quoted[-1] == max(sizes)
    segment = on.settings.segment_size
    assert segment is not None and f"of {segment:,} configured" in finding.detail
    assert min(sizes) >= 256 and max(sizes) <= segment  # Flink's bounds: min-segment-size, 32 KiB
    # enrich reads ~100 KB/s a subtask behind full queues: its gates shrink to a few KB (a gate
    # that reads little in flight, as the sink's, may stay at the most)
    enrich = [s.metrics.buffer_size for v in on.vertices if v.name == "enrich" for s in v.subtasks]
    assert all(size is not None and size < segment / 2 for size in enrich), enrich
    assert "about 1,000 ms" in finding.detail
    off = diagnose(observe(DEBLOATED, debloat=False))
    assert not any(f.kind == "debloating" for f in off.findings)
    for diagnosed in (report, off):
        [top, *_] = diagnosed.root_causes or ()
        assert (top.vertex, top.kind) == ("enrich", "slow-operator"), diagnosed.root_causes
