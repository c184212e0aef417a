"""Scenario keys ``rate_profile``, ``subtask_rates`` and ``backlog``: what they load as, the mean
rates the load models take from them, and the one-line error each bad value gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpmon.scenario import parse_scenario
from bpmon.scenario.chained import chained_scenario
from bpmon.scenario.rates import Ramp, RateBurst, Sine, Steps, mean_rate, offered_total
from tests.scenario.errors import error_of

TAIL = '[[operators]]\nname = "sink"\nkind = "sink"\nparallelism = 3\ninputs = [{ from = "src" }]\n'


def job(lines: str, rate: float = 1000) -> str:
    """src (3 subtasks at ``rate``, with ``lines``) -> sink."""
    return (
        f'name = "job"\n[[operators]]\nname = "src"\nkind = "source"\nparallelism = 3\n'
        f"rate = {rate}\n{lines}\n{TAIL}"
    )


def test_the_keys_load_as_written() -> None:
    src = parse_scenario(
        job('rate_profile = [[0, 500], [3, 2000]]\nsubtask_rates = { "2" = 1200 }\nbacklog = 50')
    ).operator("src")
    assert src.source_rates is not None
    assert src.source_rates.profile == Steps(1000, ((0.0, 500.0), (3.0, 2000.0)))
    assert dict(src.source_rates.subtask_rates) == {2: 1200.0}
    assert src.source_rates.backlog == 50
    shapes = {
        '{ shape = "burst", every_s = 4, for_s = 1, factor = 3 }': RateBurst(1000, 4, 1, 3),
        '{ shape = "ramp", to = 3000, over_s = 5, start_s = 2 }': Ramp(1000, 3000, 5, 2),
        '{ shape = "sine", amplitude = 0.5, period_s = 10 }': Sine(1000, 0.5, 10),
    }
    for written, curve in shapes.items():
        loaded = parse_scenario(job(f"rate_profile = {written}")).operator("src").source_rates
        assert loaded is not None and loaded.profile == curve, written


def test_a_source_without_them_has_none() -> None:
    assert parse_scenario(job("")).operator("src").source_rates is None


@pytest.mark.parametrize(
    ("lines", "mean"),
    [
        ("", 1000),
        # 1 s in 4 at 3x: 1,000 x (1 + 2 x 1/4)
        ('rate_profile = { shape = "burst", every_s = 4, for_s = 1, factor = 3 }', 1500),
        # 2 s at 1,000, then up to 3,000 over 4 s (2,000 on average), then 2 s at 3,000
        ('rate_profile = { shape = "ramp", to = 3000, over_s = 4, start_s = 2 }', 2000),
        # two whole periods of the wave: the base
        ('rate_profile = { shape = "sine", amplitude = 0.9, period_s = 4 }', 1000),
        # 1,000 for 2 s, 500 for 4 s, 4,000 for 2 s
        ("rate_profile = [[2, 500], [6, 4000]]", (2000 + 2000 + 8000) / 8),
    ],
)
def test_the_mean_rate_over_the_run_is_the_profiles_average(lines: str, mean: float) -> None:
    src = parse_scenario(job(lines)).operator("src")
    assert mean_rate(src, 0, 8.0) == pytest.approx(mean)


def test_subtask_rates_scale_the_profile_and_add_up() -> None:
    src = parse_scenario(
        job('subtask_rates = { "0" = 500, "2" = 1500 }\nrate_profile = [[4, 2000]]')
    ).operator("src")
    # each subtask doubles its own base at 4 s: over 8 s, 1.5 x its base
    assert [mean_rate(src, i, 8.0) for i in range(3)] == pytest.approx([750, 1500, 2250])
    assert offered_total(src, 8.0) == pytest.approx(4500)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            "rate_profile = 5",
            'key "rate_profile" = 5: expected a list of steps or a shape, e.g. [[0, 500], [3, '
            '2000]] (from 3 s on 2,000/s) or { shape = "burst", every_s = 4, for_s = 1, '
            "factor = 3 }",
        ),
        ("rate_profile = []", 'key "rate_profile" = [...] (an array): expected at least one step'),
        ("rate_profile = [[1, 2, 3]]", 'key "rate_profile" step 0 = [1, 2, 3]: expected [t_sec'),
        ("rate_profile = [[1, 0]]", "step 0 = [1, 0]: expected a time >= 0 and a rate > 0"),
        ("rate_profile = [[-1, 10]]", "step 0 = [-1, 10]: expected a time >= 0 and a rate > 0"),
        ("rate_profile = [[2, 10], [1, 20]]", "step 1 = [1, 20]: expected times in increasing"),
        (
            'rate_profile = { shape = "square" }',
            'rate_profile: key "shape" = "square": expected one of "burst", "ramp" or "sine"',
        ),
        ("rate_profile = { every_s = 2 }", 'rate_profile: missing required key "shape"'),
        (
            'rate_profile = { shape = "burst", every_s = 2, for_s = 1 }',
            'rate_profile: missing required key "factor"',
        ),
        (
            'rate_profile = { shape = "burst", every_s = 2, for_s = 2, factor = 3 }',
            'rate_profile: key "for_s" = 2: expected less than every_s (2)',
        ),
        (
            'rate_profile = { shape = "burst", every_s = 0, for_s = 1, factor = 3 }',
            'rate_profile: key "every_s" = 0: expected a number > 0',
        ),
        (
            'rate_profile = { shape = "ramp", to = 10, over_s = 1, period_s = 3 }',
            'rate_profile: unknown key "period_s"; valid keys: shape, to, over_s, start_s',
        ),
        (
            'rate_profile = { shape = "ramp", to = 10 }',
            'rate_profile: missing required key "over_s"',
        ),
        (
            'rate_profile = { shape = "sine", amplitude = 1.5, period_s = 3 }',
            'rate_profile: key "amplitude" = 1.5: expected a number from 0 to 1',
        ),
        (
            'subtask_rates = { "3" = 10 }',
            'subtask_rates: subtask index "3": expected a subtask index from 0 to 2',
        ),
        ('subtask_rates = { "1" = 0 }', 'subtask_rates: key "1" = 0: expected a number > 0'),
        ('subtask_rates = { "x" = 5 }', 'subtask index "x": expected a subtask index from 0'),
        ("subtask_rates = 5", 'key "subtask_rates" = 5: expected a table, got an integer'),
        ("backlog = -1", 'key "backlog" = -1: expected an integer >= 0'),
        ("backlog = 1.5", 'key "backlog" = 1.5: expected an integer, got a float'),
    ],
)
def test_a_bad_value_gets_one_line_naming_it(tmp_path: Path, lines: str, message: str) -> None:
    assert message in error_of(tmp_path, job(lines))


@pytest.mark.parametrize("key", ["rate_profile = [[1, 10]]", "backlog = 10"])
def test_a_profile_or_a_backlog_needs_a_rate(tmp_path: Path, key: str) -> None:
    name = key.split(" ", maxsplit=1)[0]
    assert f'key "{name}" = ' in error_of(tmp_path, job(key, rate=0))
    assert 'expected a "rate" > 0 beside it' in error_of(tmp_path, job(key, rate=0))


@pytest.mark.parametrize(
    "key", ["rate_profile = [[1, 10]]", 'subtask_rates = { "0" = 5 }', "backlog = 10"]
)
def test_only_a_source_takes_them(tmp_path: Path, key: str) -> None:
    text = job("").replace('kind = "sink"\n', f'kind = "sink"\n{key}\n')
    name = key.split(" ", maxsplit=1)[0]
    assert f'key "{name}" is only valid for kind "source"' in error_of(tmp_path, text)


def test_a_source_chained_with_its_operators_keeps_its_varying_rate() -> None:
    text = job('rate_profile = [[1, 2000]]\nbacklog = 7\nsubtask_rates = { "1" = 10 }')
    text = text.replace('name = "job"\n', 'name = "job"\nchaining = true\n')
    scenario = chained_scenario(parse_scenario(text))
    (head,) = scenario.sources()
    assert head.members and head.source_rates is not None
    assert head.source_rates == scenario.sources()[0].members[0].source_rates
    assert (head.source_rates.backlog, mean_rate(head, 1, 2.0)) == (7, 15.0)
