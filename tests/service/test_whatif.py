"""``whatif``: changes to a scenario's TOML (operators, chained vertices named like Flink's), and
the verdict on a re-run."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bpmon.model.errors import ConfigError, ScenarioError
from bpmon.model.values import (
    Edge,
    Finding,
    Level,
    Metrics,
    Report,
    RootCause,
    SubtaskStatus,
    VertexStatus,
    Window,
)
from bpmon.scenario import example_path, load_scenario
from bpmon.scenario.edits import SECTIONS
from bpmon.scenario.rates import Ramp
from bpmon.service.whatif import (
    SETTABLE,
    SettingChange,
    changed,
    nothing_to_follow,
    parse_change,
    rerouted,
    verdict,
)

CHAINED = """
name = "chained"
chaining = true

[[operators]]
name = "source"
kind = "source"
rate = 100

[[operators]]
name = "a"
kind = "map"
parallelism = 2
inputs = [{ from = "source", partitioner = "rebalance" }]

[[operators]]
name = "b"
kind = "map"
parallelism = 2
inputs = [{ from = "a" }]

[[operators]]
name = "sink"
kind = "sink"
inputs = [{ from = "b", partitioner = "rebalance" }]
"""


@pytest.fixture
def chained(tmp_path: Path) -> Path:
    path = tmp_path / "chained.toml"
    path.write_text(CHAINED)
    return path


def test_a_chain_takes_a_parallelism_for_all_its_operators(chained: Path) -> None:
    after = changed(load_scenario(chained), [parse_change("a -> b.parallelism=5")])
    assert (after.operator("a").parallelism, after.operator("b").parallelism) == (5, 5)
    assert after.operator("source").parallelism == 1  # the rest as written


def test_a_source_given_more_subtasks_keeps_the_records_it_is_offered() -> None:
    """More readers of a topic do not make more records arrive: 2 x 300/s stays 600/s."""
    source = load_scenario(example_path("source-limited")).operator("clicks")
    assert (source.parallelism, source.rate) == (2, 600)
    wider = changed(
        load_scenario(example_path("source-limited")), [parse_change("clicks.parallelism=3")]
    )
    assert (wider.operator("clicks").parallelism, wider.operator("clicks").rate) == (3, 400)
    both = [parse_change("clicks.parallelism=4"), parse_change("clicks.rate=500")]
    assert (
        changed(load_scenario(example_path("source-limited")), both).operator("clicks").rate == 500
    )


def test_other_keys_name_one_operator_of_a_chain(chained: Path) -> None:
    with pytest.raises(ConfigError, match=r"is a chain of a, b; set cost_us on one of its"):
        changed(load_scenario(chained), [SettingChange("a -> b", "cost_us", 10.0)])
    after = changed(load_scenario(chained), [parse_change("b.cost_us=10")])
    assert after.operator("b").cost_us == 10.0


def test_an_unknown_vertex_lists_the_operators(chained: Path) -> None:
    with pytest.raises(ConfigError, match=r"no operator 'a -> c'; known: source, a, b, sink"):
        changed(load_scenario(chained), [SettingChange("a -> c", "parallelism", 3)])


FORWARD = """
name = "lanes"
[[operators]]
name = "src"
kind = "source"
parallelism = 2
rate = 100
[[operators]]
name = "parse"
kind = "map"
parallelism = 2
inputs = [{ from = "src", partitioner = "forward" }]
[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
inputs = [{ from = "parse", partitioner = "forward" }]
[[operators]]
name = "sink"
kind = "sink"
parallelism = 2
inputs = [{ from = "enrich", partitioner = "forward" }]
"""


@pytest.mark.parametrize(
    ("chaining", "vertex", "moved"),
    [
        ("false", "enrich", ["parse → enrich", "enrich → sink"]),
        ("true", "src -> parse -> enrich -> sink", []),  # one chain: it stays one
    ],
)
def test_a_forward_edge_across_a_new_parallelism_becomes_rebalance_and_is_named(
    tmp_path: Path, chaining: str, vertex: str, moved: list[str]
) -> None:
    """Flink refuses forward between unequal parallelisms, so bpmon's own recommendation for a
    job written with forward edges could not be tried (the loader's one-line error): the edges
    that cross the rescaled vertex's border are rerouted, and named; inside a chain, whose
    members all take the new parallelism, every edge stays forward."""
    path = tmp_path / "lanes.toml"
    path.write_text(f"chaining = {chaining}\n{FORWARD}")
    before = load_scenario(path)
    after = changed(before, [SettingChange(vertex, "parallelism", 4)])
    assert rerouted(before, after) == moved
    assert after.name == f"lanes with {vertex}.parallelism=4"  # an experiment: a job apart
    left = {f"{e.source} → {op.name}" for op in after.operators for e in op.inputs}
    kept = {f"{e.source} → {op.name}" for op in after.operators for e in op.inputs
            if e.partitioner == "forward"}  # fmt: skip
    assert kept == left - set(moved)
    same = changed(before, [SettingChange(vertex, "parallelism", 2)])
    assert rerouted(before, same) == []  # an equal parallelism keeps every edge forward


# --- the verdict on a re-run -------------------------------------------------------------------

START = datetime(2026, 11, 23, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(seconds=5), 100, 50.0)


def _report(busy: float, in_pool: float, level: Level = "OK") -> Report:
    """source -> enrich (one subtask) with enrich's busy ratio and input pool as given."""
    source = VertexStatus("source", 1, level, 0.9 if level == "HIGH" else 0.0)
    sub = SubtaskStatus(0, "OK", 0.0, Metrics(busy_ratio=busy, in_pool_usage=in_pool))
    enrich = VertexStatus(
        "enrich", 1, "OK", 0.0, Metrics(busy_ratio=busy), (Edge("source"),), (sub,)
    )
    return Report("run", "job", "runtime", WINDOW, (source, enrich), ())


def test_a_re_run_whose_bottleneck_still_queues_has_not_removed_the_backpressure() -> None:
    """Nothing HIGH yet, but enrich is saturated with its input buffers full: with Flink's
    flushing the backpressure may simply not have reached the source within the re-run."""
    before = replace(_report(1.0, 1.0, "HIGH"), root_causes=(RootCause("enrich", "slow-operator"),))
    change = [SettingChange("enrich", "parallelism", 4)]
    queued = verdict(before, _report(0.99, 1.0), change)
    assert not queued.removed
    assert queued.summary == (
        "not removed: with enrich.parallelism=4, enrich[0] cannot keep up (busy at least 90% "
        "with its input buffers full): backpressure is still building"
    )
    assert verdict(before, _report(0.99, 0.3), change).removed  # busy, but its queue stays short
    assert verdict(before, _report(0.5, 1.0), change).removed  # a full queue it works off


def test_a_changed_vertex_still_saturated_is_removed_at_the_edge() -> None:
    """demo at 6 subtasks (bpmon recommends 7): nothing is HIGH and the queue stays short, but
    enrich is 97% busy; the verdict must not read as if it had room to spare."""
    cause = RootCause("enrich", "slow-operator", recommended_parallelism=7)
    before = replace(_report(1.0, 1.0, "HIGH"), root_causes=(cause,))
    change = [SettingChange("enrich", "parallelism", 6)]
    edge = verdict(before, _report(0.97, 0.3), change)
    assert (edge.removed, edge.at_edge) == (True, ("enrich",))
    assert edge.summary == (
        "removed, at the edge: with enrich.parallelism=6, no vertex is HIGH (worst ratio 0.00), "
        "but the changed vertex is still busy (enrich 97%): nothing to spare, so the next rise "
        "in load brings the backpressure back (the first report recommended enrich 7)"
    )
    roomy = verdict(before, _report(0.86, 0.3), [SettingChange("enrich", "parallelism", 7)])
    assert (roomy.removed, roomy.at_edge) == (True, ())
    other = verdict(before, _report(0.97, 0.3), [SettingChange("source", "rate", 100.0)])
    assert other.at_edge == ()  # only a changed vertex is judged: enrich was not changed


def test_a_cause_that_shows_no_backpressure_is_removed_only_when_none_of_its_kind_is_left() -> None:
    """Lowering one of two waiting vertices moves the wait to the other: nothing is HIGH before
    or after, and the old vertex is no longer blamed, but the job is still short of slots."""
    before = replace(_report(0.0, 0.0), root_causes=(RootCause("source", "resource-starved"),))
    change = [SettingChange("source", "parallelism", 1)]
    moved = replace(_report(0.0, 0.0), root_causes=(RootCause("enrich", "resource-starved"),))
    still = verdict(before, moved, change)
    assert not still.removed
    assert still.summary == (
        "not removed: with source.parallelism=1, resource-starved at enrich remains"
    )
    assert verdict(before, _report(0.3, 0.1), change).removed


def test_a_step_after_a_re_run_still_building_says_why_it_has_nothing_to_follow() -> None:
    """No cause named, but enrich saturated with its input buffers full: the next step has
    nothing to apply because the backpressure had not reached the producers yet."""
    assert nothing_to_follow(_report(0.99, 1.0), "bpmon") == (
        "bpmon has no cause to follow: the last re-run was sampled while its backpressure was "
        "still building (enrich[0] cannot keep up); give it a longer [monitor] settle_s"
    )
    assert nothing_to_follow(_report(0.5, 0.2), "bpmon") == "bpmon would change nothing more"
    sized = replace(_report(0.99, 1.0), root_causes=(RootCause("enrich", "slow-operator"),))
    assert nothing_to_follow(sized, "autoscaler") == "autoscaler would change nothing more"


def test_a_re_run_whose_runtime_was_saturated_is_not_judged() -> None:
    """A loaded machine slowed the re-run's runtime below its own sources' rates: nothing is
    HIGH because nothing ran at the job's pace, so the verdict must not say removed."""
    cause = RootCause("enrich", "slow-operator", recommended_parallelism=7)
    before = replace(_report(1.0, 1.0, "HIGH"), root_causes=(cause,))
    finding = Finding("runtime-saturated", "source", "the runtime ran 40% behind its sources")
    after = replace(_report(0.3, 0.1), findings=(finding,))
    change = [SettingChange("enrich", "parallelism", 7)]
    assert verdict(before, _report(0.3, 0.1), change).removed  # the same figures, not saturated
    judged = verdict(before, after, change)
    assert (judged.removed, judged.at_edge) == (False, ())
    assert judged.summary.startswith("not judged: with enrich.parallelism=7, the re-run's runtime")


def test_a_varying_source_given_more_subtasks_keeps_its_records(tmp_path: Path) -> None:
    """Uneven subtasks (500 + 1,000 + 1,500/s) become 4 x 750/s, a ramp to 2,000/s at the
    3,000/s base scales to 1,500/s at 750, and 3 x 1,000 records waiting become 4 x 750."""
    path = tmp_path / "varying.toml"
    path.write_text(
        'name = "varying"\n[[operators]]\nname = "src"\nkind = "source"\nparallelism = 3\n'
        'rate = 1000\nsubtask_rates = { "0" = 500, "2" = 1500 }\nbacklog = 1000\n'
        'rate_profile = { shape = "ramp", to = 2000, over_s = 4 }\n'
        '[[operators]]\nname = "sink"\nkind = "sink"\ninputs = [{ from = "src" }]\n'
    )
    src = changed(load_scenario(path), [parse_change("src.parallelism=4")]).operator("src")
    assert (src.parallelism, src.rate) == (4, 750)
    assert src.source_rates is not None
    assert dict(src.source_rates.subtask_rates) == {}
    assert src.source_rates.backlog == 750
    assert src.source_rates.profile == Ramp(750, 1500, 4)


def test_the_readme_lists_every_key_whatif_takes() -> None:
    """The README's whatif section names exactly the keys ``--set`` accepts."""
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### `bpmon whatif") :]
    listed = section[section.index("Keys: ") : section.index(". A change")]
    named = re.findall(r"`([\w.]+)`", listed)
    assert [k for k in named if "." not in k] == list(SETTABLE)
    assert [k for k in named if "." in k] == [
        f"{table}.{key}" for table, keys in SECTIONS.items() for key in keys
    ]


def test_job_wide_keys_change_their_table_and_are_checked_as_a_file_is() -> None:
    demo = load_scenario(example_path("checkpoint-timeouts"))
    unaligned = changed(demo, [parse_change("checkpoints.mode=unaligned")])
    assert unaligned.checkpoints.mode == "unaligned"
    assert unaligned.name == "checkpoint-timeouts with checkpoints.mode=unaligned"
    debloated = changed(demo, [parse_change("network.debloat=true")])
    assert debloated.network.debloat and not demo.network.debloat
    both = [
        parse_change("checkpoints.mode=unaligned"),
        parse_change("checkpoints.aligned_timeout_ms=800"),
    ]
    assert changed(demo, both).checkpoints.aligned_timeout_ms == 800
    with pytest.raises(ScenarioError, match='needs mode = "unaligned"'):
        changed(demo, [parse_change("checkpoints.aligned_timeout_ms=800")])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("checkpoints.mode=sideways", "expected one of aligned, unaligned"),
        ("network.debloat=yes", "'yes' is not true or false"),
        ("checkpoints.timeout_ms=soon", "'soon' is not an integer"),
        ("checkpoints.colour=red", "'colour' cannot be set; use an operator's parallelism"),
    ],
)
def test_a_bad_job_wide_change_is_one_line_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_change(text)


@pytest.mark.slow
def test_the_readme_s_checkpoint_what_if_is_what_the_command_prints(
    bpmon_bin: Path, tmp_path: Path
) -> None:
    """The README shows the shipped checkpoint-timeouts fixed by unaligned checkpoints: every
    checkpoint expired before, none after, and backpressure no longer holds them."""
    done = subprocess.run(
        [str(bpmon_bin), "whatif", "checkpoint-timeouts", "--set", "checkpoints.mode=unaligned"],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
        env={**os.environ, "COLUMNS": "100", "BPMON_RUNS_DIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    lines = {line.split("  ")[0]: line for line in done.stdout.splitlines()}
    duration = re.fullmatch(
        r"checkpoint duration +([\d,]+) ms \(failed\) → ([\d,]+) ms", lines["checkpoint duration"]
    )
    assert duration is not None, done.stdout
    assert int(duration[1].replace(",", "")) >= 4000  # expired at its 4 s timeout
    assert int(duration[2].replace(",", "")) < 1000
    failed = re.fullmatch(
        r"failed checkpoints +([\d,]+) of [\d,]+ checkpoints? → 0 of [\d,]+ checkpoints?",
        lines["failed checkpoints"],
    )
    assert failed is not None and int(failed[1]) >= 1, done.stdout
    assert re.fullmatch(r"held by backpressure +yes, by enrich → no", lines["held by backpressure"])
    assert "✗ backpressure not removed" in done.stdout  # the job is as slow as before
