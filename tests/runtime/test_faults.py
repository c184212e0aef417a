"""The scenario key ``fail``: checked in the file, raised in the chosen subtasks' threads.

Every failure here is a real job failing through the real path: a subtask raises a plain
RuntimeError from its task loop, the job is told, and stopping it returns every buffer (the
``stop_job`` fixture asserts no leak and no live thread).
"""

from __future__ import annotations

import re
import time

import pytest

from bpmon.model.errors import ScenarioError
from bpmon.runtime.job import Job
from bpmon.scenario import FailSpec, parse_scenario, parse_topology
from tests.runtime.jobs import StopJob

CHAIN = """
name = "faulty"

[[operators]]
name = "source"
kind = "source"
rate = {rate}
{source_fail}

[[operators]]
name = "work"
kind = "map"
parallelism = 2
{work_fail}
inputs = [{{ from = "source", partitioner = "rebalance" }}]

[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "work", partitioner = "rebalance" }}]
"""


def _chain(rate: float = 2000, source_fail: str = "", work_fail: str = "") -> str:
    return CHAIN.format(rate=rate, source_fail=source_fail, work_fail=work_fail)


def _error(text: str) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "f.toml")
    message = str(info.value)
    assert "\n" not in message
    return message


# -- the key in the file ------------------------------------------------------------------------


def test_the_key_is_read_into_the_operator_spec() -> None:
    scenario = parse_scenario(_chain(work_fail="fail = { after_s = 2.5, subtask = 1 }"))
    assert scenario.operator("work").fail == FailSpec(after_s=2.5, subtask=1)
    assert scenario.operator("source").fail is None
    records = parse_scenario(_chain(source_fail="fail = { after_records = 0 }"))
    assert records.operator("source").fail == FailSpec(after_records=0)


@pytest.mark.parametrize(
    ("fail", "message"),
    [
        ("fail = {}", 'fail: expected exactly one of "after_records"'),
        ("fail = { after_records = 5, after_s = 1 }", "expected exactly one of"),
        ("fail = { after_record = 5 }", 'unknown key "after_record" (did you mean "after_records"'),
        ("fail = { after_records = -1 }", 'key "after_records" = -1: expected an integer >= 0'),
        ("fail = { after_records = 1.5 }", "expected an integer, got a float"),
        ("fail = { after_s = -0.5 }", 'key "after_s" = -0.5: expected a number >= 0'),
        ("fail = { after_s = 1, subtask = 2 }", "a subtask index from 0 to 1"),
        ("fail = true", 'key "fail" = true: expected a table'),
    ],
)
def test_a_bad_fail_key_is_one_line_naming_the_operator(fail: str, message: str) -> None:
    error = _error(_chain(work_fail=fail))
    assert error.startswith('f.toml: operators[1] "work"'), error
    assert message in error, error


def test_a_topology_file_cannot_inject_failures() -> None:
    with pytest.raises(ScenarioError, match='key "fail" is only valid in scenario files'):
        parse_topology('name = "t"\n[[operators]]\nname = "a"\nfail = { after_s = 1 }\n')


# -- the failure in a running job ---------------------------------------------------------------


def test_after_records_fails_each_subtask_after_exactly_that_many(stop_job: StopJob) -> None:
    job = Job(parse_scenario(_chain(rate=0, work_fail="fail = { after_records = 1000 }")))
    result = job.run(30)
    stop_job(job)
    assert result.state == "failed"
    assert result.error is not None
    assert re.fullmatch(
        r"subtask 'work \(([12])/2\)' failed: RuntimeError: injected failure: work \(\1/2\) "
        r"processed 1000 records \(scenario key fail.after_records\)",
        result.error,
    ), result.error
    # a map emits what it processes: no subtask got past its 1,000th record
    emitted = [task.records_out.total for task in job.tasks["work"]]
    assert max(emitted) == 1000, emitted


def test_a_source_fails_after_emitting_that_many_records(stop_job: StopJob) -> None:
    job = Job(parse_scenario(_chain(rate=0, source_fail="fail = { after_records = 300 }")))
    result = job.run(30)
    stop_job(job)
    assert result.error == (
        "subtask 'source (1/1)' failed: RuntimeError: injected failure: source (1/1) "
        "processed 300 records (scenario key fail.after_records)"
    )
    assert job.tasks["source"][0].records_out.total == 300


def test_only_the_named_subtask_fails(stop_job: StopJob) -> None:
    job = Job(parse_scenario(_chain(work_fail="fail = { after_records = 50, subtask = 1 }")))
    result = job.run(30)
    stop_job(job)
    assert result.error is not None and result.error.startswith("subtask 'work (2/2)' failed")
    spared, failed = job.tasks["work"]
    assert spared.error is None
    assert isinstance(failed.error, RuntimeError)


def test_after_s_fails_an_idle_subtask_no_earlier_than_that(stop_job: StopJob) -> None:
    """A source emitting one record a second leaves the map idle: it fails from its loop."""
    job = Job(parse_scenario(_chain(rate=1, work_fail="fail = { after_s = 0.3, subtask = 0 }")))
    began = time.monotonic()
    job.start()
    try:
        assert job.wait(30), "the injected failure did not reach the job"
        assert time.monotonic() - began >= 0.3
    finally:
        result = stop_job(job)
    assert result.error == (
        "subtask 'work (1/2)' failed: RuntimeError: injected failure: work (1/2) ran 0.3 s "
        "(scenario key fail.after_s)"
    )
