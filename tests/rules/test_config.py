"""Loading rules/backpressure.toml: defaults, overrides, and one-line errors for bad values."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bpmon.model.errors import ConfigError
from bpmon.rules.config import KindRules, LevelRules, RulesConfig, load_rules


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_file_documents_exactly_the_defaults() -> None:
    loaded = load_rules()
    assert loaded.origin.endswith("backpressure.toml")
    assert replace(loaded, origin="defaults") == RulesConfig()


def test_shipped_file_is_found_by_name() -> None:
    assert load_rules("backpressure").levels == LevelRules()


def test_missing_keys_keep_their_defaults(tmp_path: Path) -> None:
    rules = load_rules(write(tmp_path, "[levels]\nok_max = 0.2\n[kinds]\nskew_ratio = 2\n"))
    assert rules.levels.ok_max == 0.2
    assert rules.levels.low_max == 0.5
    assert rules.kinds.skew_ratio == 2
    assert rules.kinds.busy_share_of_max == KindRules().busy_share_of_max
    assert rules.bottleneck == RulesConfig().bottleneck


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("[levels]\nok_max = 1.5\n", ["levels.ok_max", "1.5", "between 0 and 1"]),
        ("[levels]\nok_max = '0.1'\n", ["levels.ok_max", "'0.1'", "expected a number"]),
        ("[levels]\nok_max = true\n", ["levels.ok_max", "expected a number"]),
        ("[levels]\nokmax = 0.1\n", ["levels.okmax", "known keys", "ok_max"]),
        ("[level]\nok_max = 0.1\n", ["'level'", "known tables"]),
        ("levels = 3\n", ["levels = 3", "expected a table"]),
        ("[levels]\nok_max = 0.6\n", ["levels.ok_max = 0.6", "levels.low_max = 0.5"]),
        ("[kinds]\nskew_ratio = 0.9\n", ["kinds.skew_ratio", ">= 1"]),
        ("[kinds]\nspill_metrics = []\n", ["kinds.spill_metrics", "no longer read", "delete"]),
        ("[bottleneck]\nbusy_min = 0.95\n", ["bottleneck.busy_min", "saturated_busy"]),
        ("[capacity]\nutilisation_target = 1.5\n", ["utilisation_target"]),
        ("[capacity]\nutilisation_target = 0\n", ["utilisation_target"]),
        (
            "[confidence]\npressure = 0\nseparation = 0\nsaturation = 0\nagreement = 0\n",
            ["confidence weights"],
        ),
        ("[levels\nok_max = 0.1\n", ["not valid TOML"]),
    ],
)
def test_bad_values_are_one_line_errors_naming_file_key_and_value(
    tmp_path: Path, text: str, names: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_rules(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    for name in names:
        assert name in message


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no rules file named"):
        load_rules(tmp_path / "absent.toml")


def test_building_rules_in_code_validates_too() -> None:
    with pytest.raises(ConfigError, match=r"levels.low_max = -0.1"):
        RulesConfig(levels=LevelRules(low_max=-0.1))
