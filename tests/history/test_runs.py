"""The runs store is safe: atomic writes, no silent overwrite, corrupt files intact."""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from bpmon.history.runs import RunStore, new_run_id
from bpmon.model.errors import ConfigError, HistoryError, SaveError, TargetNotFoundError
from bpmon.model.values import Report, VertexStatus, Window
from tests.history.reports import T0, run_report


def files_in(folder: Path) -> list[str]:
    """Every file name under ``folder``, hidden ones included, relative and sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_new_run_id_is_time_job_and_four_hex_digits() -> None:
    run_id = new_run_id(
        "slow-enrich", datetime(2026, 11, 22, 10, 15, 0, 999, tzinfo=UTC), random.Random(7)
    )
    assert re.fullmatch(r"20261122T101500Z-slow-enrich-[0-9a-f]{4}", run_id)
    same = new_run_id("slow-enrich", datetime(2026, 11, 22, 10, 15, tzinfo=UTC), random.Random(7))
    assert same == run_id  # the same clock and seed give the same id


def test_new_run_id_uses_utc_and_a_folder_safe_job_name() -> None:
    tokyo = timezone(timedelta(hours=9))
    now = datetime(2026, 11, 22, 19, 15, 0, tzinfo=tokyo)
    run_id = new_run_id("orders / EU: v2", now, random.Random(1))
    assert re.fullmatch(r"20261122T101500Z-orders-EU-v2-[0-9a-f]{4}", run_id)
    assert new_run_id("///", now, random.Random(1)).startswith("20261122T101500Z-job-")


def test_new_run_ids_of_one_second_differ_by_their_random_part() -> None:
    rng = random.Random(3)
    ids = {new_run_id("j", T0, rng) for _ in range(20)}
    assert len(ids) > 15


def test_save_then_load_by_run_id_folder_and_file(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    original = run_report("20261122T101500Z-slow-enrich-3f9a")
    path = store.save(original)
    assert path == tmp_path / "runs" / "20261122T101500Z-slow-enrich-3f9a" / "report.json"
    assert json.loads(path.read_text(encoding="utf-8"))["run_id"] == original.run_id
    assert store.load(original.run_id) == original
    assert store.load(path.parent) == original
    assert store.load(str(path)) == original
    assert files_in(tmp_path / "runs") == [
        "20261122T101500Z-slow-enrich-3f9a/bursts.jsonl",
        "20261122T101500Z-slow-enrich-3f9a/report.json",
    ]


def test_saving_the_same_report_twice_is_harmless(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    first = store.save(run_report("r1"))
    assert store.save(run_report("r1")) == first
    assert files_in(tmp_path) == ["r1/bursts.jsonl", "r1/report.json"]
    assert len((tmp_path / "r1" / "bursts.jsonl").read_text().splitlines()) == 1


def test_a_different_report_never_overwrites_a_stored_one(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    path = store.save(run_report("r1"))
    before = path.read_bytes()
    other = replace(run_report("r1"), job="another-job")
    with pytest.raises(SaveError, match=r"burst=1") as caught:
        store.save(other)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == before
    assert files_in(tmp_path) == ["r1/bursts.jsonl", "r1/report.json"]


def test_later_bursts_go_to_numbered_files(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    bursts = [run_report("r1", T0 + timedelta(seconds=5 * k)) for k in range(3)]
    paths = [store.save(b, burst=k) for k, b in enumerate(bursts)]
    assert [p.name for p in paths] == ["report.json", "report-1.json", "report-2.json"]
    assert [store.load("r1", burst=k) for k in range(3)] == bursts
    assert store.list_runs()[0].bursts == 3
    with pytest.raises(TargetNotFoundError, match="no burst 7"):
        store.load("r1", burst=7)


@pytest.mark.parametrize("run_id", ["", "../escape", "a/b", ".hidden"])
def test_a_run_id_that_cannot_name_a_folder_is_refused(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(ConfigError, match="run_id"):
        RunStore(tmp_path / "runs").save(run_report(run_id))
    assert not (tmp_path / "runs").exists() or files_in(tmp_path / "runs") == []
    assert files_in(tmp_path) == []


def test_a_missing_run_says_how_to_see_the_runs(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    with pytest.raises(TargetNotFoundError, match="no runs stored yet") as empty:
        store.load("nope")
    assert "bpmon history" in str(empty.value)
    store.save(run_report("20261122T101500Z-a-0001"))
    with pytest.raises(TargetNotFoundError, match="20261122T101500Z-a-0001") as caught:
        store.load("nope")
    assert "'nope'" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "content",
    [b'{"schema": "bpmon.report/1", "run_id": ', b"\xff\xfe not utf-8", b'{"schema": "x/9"}'],
)
def test_a_corrupt_report_is_named_and_left_untouched(tmp_path: Path, content: bytes) -> None:
    store = RunStore(tmp_path)
    path = store.save(run_report("r1"))
    path.write_bytes(content)
    with pytest.raises(HistoryError) as caught:
        store.load("r1")
    message = str(caught.value)
    assert str(path) in message
    assert "the file is left untouched" in message
    assert "\n" not in message
    assert path.read_bytes() == content
    with pytest.raises(SaveError):
        store.save(run_report("r1"))  # nor does saving over it replace it
    assert path.read_bytes() == content


def test_list_runs_is_newest_first_and_skips_corrupt_runs(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.save(run_report("b-middle", T0))
    store.save(run_report("c-oldest", T0 - timedelta(hours=1)))
    newest = Report(
        "a-newest",
        "other",
        "pyspy",
        Window(T0 + timedelta(hours=1), T0 + timedelta(hours=1, seconds=5), 100, 50.0),
        (VertexStatus("stage", 1),),
    )
    store.save(newest)
    broken = tmp_path / "d-broken" / "report.json"  # saved before manifests, then torn
    broken.parent.mkdir()
    broken.write_text("{not json", encoding="utf-8")
    torn = store.save(run_report("e-torn-later"))  # its manifest line still describes it
    torn.write_text("{not json", encoding="utf-8")
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "stray.txt").write_text("hello", encoding="utf-8")

    problems: list[HistoryError] = []
    runs = store.list_runs(on_corrupt=problems.append)

    assert [r.run_id for r in runs] == ["a-newest", "e-torn-later", "b-middle", "c-oldest"]
    runs = [r for r in runs if r.run_id != "e-torn-later"]  # listed; reading it says it is torn
    with pytest.raises(HistoryError, match="e-torn-later"):
        store.load("e-torn-later")
    assert (runs[0].job, runs[0].source, runs[0].worst_level, runs[0].root_causes) == (
        "other",
        "pyspy",
        None,
        None,
    )
    assert runs[1].worst_level == "HIGH"
    assert runs[1].root_causes is not None
    assert runs[1].root_causes[0].kind == "slow-sink"
    assert runs[1].start == T0
    assert runs[1].path == tmp_path / "b-middle"
    assert len(problems) == 1
    assert str(broken) in str(problems[0])
    assert broken.read_text(encoding="utf-8") == "{not json"
    assert [r for r in store.list_runs() if r.run_id != "e-torn-later"] == runs


def test_an_absent_root_has_no_runs(tmp_path: Path) -> None:
    assert RunStore(tmp_path / "never-created").list_runs() == []


def test_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    for k in range(5):
        store.save(run_report("r1", T0 + timedelta(seconds=k)), burst=k)
    store.save(run_report("r2"))
    expected = [
        "r1/bursts.jsonl",
        *[f"r1/report-{k}.json" for k in range(1, 5)],
        "r1/report.json",
        "r2/bursts.jsonl",
        "r2/report.json",
    ]
    assert files_in(tmp_path) == expected
