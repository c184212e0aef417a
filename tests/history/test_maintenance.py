"""``history_service.maintain``, ``compact_history`` and ``prune_history`` on real datasets.

What a server calls every hour: past days merged into one part, today's compacted in tiers, days
older than ``[history] keep_days`` pruned (the dataset's and the run folders), a job-day that
cannot be compacted named while the rest is done, and nothing to do costing nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bpmon.history.runs import RunStore
from bpmon.history.store import HistoryStore
from bpmon.model.errors import ConfigError
from bpmon.model.values import Report
from bpmon.service.facade import Settings
from bpmon.service.history import maintain, prune_history
from tests.history.on_disk import files

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
Exactly = Callable[[HistoryStore, set[tuple[str, int]]], None]


def settings(runs: Path, keep_days: int) -> Settings:
    rules = runs.parent / "rules.toml"
    rules.write_text(f"[history]\nkeep_days = {keep_days}\n")
    return Settings(runs_dir=runs, rules_path=rules, now=lambda: NOW)


def watch(
    runs: Path,
    make_report: Callable[..., Report],
    run: str,
    start: datetime,
    bursts: int,
    job: str = "enrich/eu",
) -> set[tuple[str, int]]:
    """A watch's bursts saved and appended as single parts (as a writer that never compacts)."""
    store, history = RunStore(runs), HistoryStore.in_runs_dir(runs, compact=False)
    for burst in range(bursts):
        report = make_report(burst, run_id=run, start=start, job=job)
        store.save(report, burst)
        history.append(report, burst)
    return {(run, b) for b in range(bursts)}


@pytest.fixture
def three_days(tmp_path: Path, make_report: Callable[..., Report]) -> tuple[Path, set]:  # type: ignore[type-arg]
    """Runs of ten days ago, of yesterday and of this morning; the windows of the last two."""
    runs = tmp_path / "runs"
    watch(runs, make_report, "20261112T080000Z-enrich-0001", NOW - timedelta(days=10), 5)
    kept = watch(runs, make_report, "20261121T080000Z-enrich-0002", NOW - timedelta(days=1), 40)
    kept |= watch(runs, make_report, "20261122T080000Z-enrich-0003", NOW - timedelta(hours=4), 40)
    return runs, kept


def test_maintain_merges_compacts_and_prunes(
    three_days: tuple[Path, set[tuple[str, int]]], exactly: Exactly
) -> None:
    runs, kept = three_days
    history = HistoryStore.in_runs_dir(runs)
    assert len(files(history.root / "subtasks")) == 5 + 40 + 40
    done = maintain(settings(runs, keep_days=3))
    assert done.problems == ()
    assert done.compaction is not None and done.pruning is not None
    assert (done.compaction.days, done.compaction.merged) == (2, 40 + 40)
    assert done.pruning.dataset is not None
    assert [str(d.day) for d in done.pruning.dataset.days] == ["2026-11-12"]
    assert (done.pruning.runs, done.pruning.bursts) == (1, 5)
    folders = sorted((history.root / "subtasks").glob("job=*/date=*"))
    assert [f.name for f in folders] == ["date=2026-11-21", "date=2026-11-22"]
    assert [len(list(f.iterdir())) for f in folders] == [1, 1]
    exactly(history, kept)
    assert not (runs / "20261112T080000Z-enrich-0001").exists()
    assert (runs / "20261121T080000Z-enrich-0002" / "report.json").is_file()

    again = maintain(settings(runs, keep_days=3))
    assert again.compaction is not None and again.pruning is not None
    assert (again.compaction.days, again.compaction.merged, again.compaction.deleted) == (0, 0, 0)
    assert again.pruning.dataset is not None and again.pruning.dataset.days == ()
    assert again.problems == ()


def test_maintain_names_a_job_day_it_cannot_compact_and_does_the_rest(
    three_days: tuple[Path, set[tuple[str, int]]], make_report: Callable[..., Report]
) -> None:
    runs, _ = three_days
    other = "20261121T090000Z-other-0001"
    broken = watch(runs, make_report, other, NOW - timedelta(days=1), 3, job="other")
    assert len(broken) == 3
    part = next((runs / "history/subtasks").glob("job=other*/date=*/part-*-1.parquet"))
    data = bytearray(part.read_bytes())
    data[4:200] = bytes(196)  # its pages torn, its footer intact: it lists, it does not read
    part.write_bytes(bytes(data))
    done = maintain(settings(runs, keep_days=0))
    assert len(done.problems) == 1
    assert "job 'other' on 2026-11-21: not compacted" in done.problems[0]
    assert "left as it was" in done.problems[0]
    assert done.compaction is not None and done.compaction.days == 3  # enrich's three days
    assert len(list(part.parent.iterdir())) == 3  # the broken job-day as it was...
    causes = runs / "history/causes" / part.parent.relative_to(runs / "history/subtasks")
    assert [p.name for p in causes.iterdir()] == [f"part-{other}-1.parquet"]  # ...both tables
    assert done.pruning is not None and done.pruning.keep_days == 0  # keeps everything


def test_maintain_without_a_history_does_nothing(tmp_path: Path) -> None:
    done = maintain(settings(tmp_path / "runs", keep_days=30))
    assert (done.compaction, done.problems) == (None, ())


def test_a_dry_run_prunes_nothing_and_keep_days_0_keeps_everything(
    three_days: tuple[Path, set[tuple[str, int]]],
) -> None:
    runs, _ = three_days
    before = files(runs)
    dry = prune_history(settings(runs, keep_days=3), dry_run=True)
    assert dry.dataset is not None and [str(d.day) for d in dry.dataset.days] == ["2026-11-12"]
    assert dry.dataset.files == 5 + 2  # five windows, two of them with a cause
    assert (dry.runs, dry.bursts, dry.dry_run) == (1, 5, True)  # counted, not removed
    kept = prune_history(settings(runs, keep_days=3), keep_days=0)
    assert (kept.cutoff, kept.dataset) == (None, None)
    assert files(runs) == before


def test_negative_keep_days_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--keep-days -1"):
        prune_history(settings(tmp_path, keep_days=30), keep_days=-1)
    (tmp_path / "bad.toml").write_text("[history]\nkeep_days = 1.5\n")
    with pytest.raises(ConfigError, match=r"history\.keep_days = 1\.5"):
        prune_history(Settings(runs_dir=tmp_path, rules_path=tmp_path / "bad.toml"))
