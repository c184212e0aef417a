"""The soak of ``bpmon serve`` (``tests/benchmarks/bench_soak.py``), two minutes of it in CI.

Four shipped jobs watched a burst a second by a real ``bpmon serve``: the server must answer
``/healthz`` within a second every time it is asked, leave only valid reports, stop growing in
memory once warm, keep its history's file count bounded, stop on SIGTERM within 5 s with exit
code 0, and, restarted over 10,000 stored bursts, list every job within 2 s. The benchmark runs
the same for 30 minutes (its default) and prints the figures.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).parents[1] / "benchmarks" / "bench_soak.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_soak", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_soak"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_serve_survives_a_two_minute_soak_and_restarts_fast(
    capsys: pytest.CaptureFixture[str],
) -> None:
    soak = bench()
    result = soak.main(["--minutes", "2", "--warmup", "0.75", "--poll", "5", "--bursts", "10000"])
    shown = capsys.readouterr().out
    assert result["polls"] >= 20, shown
    assert result["healthz_answered"] == result["polls"], shown  # within 1 s, every time
    assert result["invalid_reports"] == 0 and result["reports"] >= 40, shown
    assert result["rss_growth_after_warmup_mb"] < soak.RSS_GROWTH_LIMIT_MB, shown
    bound = soak.HISTORY_FILES_PER_JOB * len(soak.JOBS)
    assert result["history_files_max"] <= bound, shown  # bounded: compaction keeps up
    assert result["exit_code"] == 0 and result["stop_s"] < soak.STOP_LIMIT_S, shown
    assert result["restart_all_jobs_listed"] and result["restart_history_shown"] == 1000, shown
    assert result["restart_jobs_answer_s"] < soak.RESTART_LIMIT_S, shown
