"""The shipped Prometheus rules load, and behave as their unit tests say, in the real promtool.

``promtool check rules`` parses every expression and template; ``promtool test rules`` replays
the series of ``rules/tests/prometheus-alerts.test.yml`` through the rules and compares the alerts
that fire (labels and rendered annotations) at each stated time. A last check keeps the unit tests
in step with the rules: every alert is expected to fire somewhere.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from bpmon.model.datafiles import data_file

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "rules" / "prometheus-alerts.yml"
UNIT_TESTS = REPO / "rules" / "tests" / "prometheus-alerts.test.yml"


def _promtool(promtool: Path, *argv: str | Path, cwd: Path = REPO) -> str:
    done = subprocess.run(
        [promtool, *argv], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )
    assert done.returncode == 0, f"promtool {argv[0]} {argv[1]} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def test_promtool_checks_the_rules(promtool: Path) -> None:
    out = _promtool(promtool, "check", "rules", RULES)
    assert "SUCCESS: 18 rules found" in out


def test_the_alerts_fire_as_the_unit_tests_expect(promtool: Path) -> None:
    # promtool resolves rule_files against the test file's folder, from any working directory.
    out = _promtool(promtool, "test", "rules", UNIT_TESTS, cwd=Path("/"))
    assert "SUCCESS" in out


def test_every_alert_is_expected_to_fire_in_a_unit_test() -> None:
    alerts = set(re.findall(r"^\s*- alert: (\w+)$", RULES.read_text("utf-8"), re.MULTILINE))
    fired = set(
        re.findall(
            r"alertname: (\w+)\n\s+exp_alerts:\n\s+- exp_labels",
            UNIT_TESTS.read_text("utf-8"),
        )
    )
    assert len(alerts) == 10
    assert {"BpmonCheckpointsHeldByBackpressure", "BpmonAutoscalerScalesIneffectively"} <= alerts
    assert alerts == fired, f"alerts without a firing unit test: {sorted(alerts - fired)}"


def test_the_rules_ship_with_the_package() -> None:
    shipped = data_file("rules", "prometheus-alerts", suffix=".yml")
    assert shipped.read_bytes() == RULES.read_bytes()
