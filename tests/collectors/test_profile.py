"""Collector profiles: the shipped files, pattern semantics, one-line errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bpmon.collectors.flink.dumps import LEGACY_SOURCE_THREAD, parse_dump
from bpmon.collectors.flink.window import chain_operators
from bpmon.collectors.profile import StackClassifier, load_profile, parse_profile
from bpmon.model.errors import ConfigError

PY = "/usr/lib/python3.11"
QUEUE_PUT = f"{PY}/queue.py:Queue.put"
QUEUE_GET = f"{PY}/queue.py:Queue.get"
COND_WAIT = f"{PY}/threading.py:Condition.wait"
MP_PUT = f"{PY}/multiprocessing/queues.py:Queue.put"
USER = "/srv/app/stages.py:transform"


def classify(profile: str, *frames: str) -> str:
    """Classify one stack (innermost frame first) with a shipped profile."""
    return StackClassifier(load_profile(profile)).classify(frames)


@pytest.mark.parametrize("name", ["bpmon-runtime", "python-queue", "flink-jvm"])
def test_shipped_profiles_load_under_their_file_names(name: str) -> None:
    profile = load_profile(name)
    assert profile.name == name
    assert profile.backpressured
    assert profile.path is not None and profile.path.stem == name


def test_python_queue_put_waiting_on_a_full_queue_is_backpressured() -> None:
    assert classify("python-queue", COND_WAIT, QUEUE_PUT, USER) == "backpressured"


def test_python_queue_get_waiting_on_an_empty_queue_is_idle() -> None:
    assert classify("python-queue", COND_WAIT, QUEUE_GET, USER) == "idle"


def test_python_queue_put_that_is_not_waiting_is_busy() -> None:
    notify = f"{PY}/threading.py:Condition.notify"
    assert classify("python-queue", notify, QUEUE_PUT, USER) == "busy"
    assert classify("python-queue", QUEUE_PUT, USER) == "busy"  # taking the queue's mutex


def test_python_queue_matches_py_spy_03_bare_function_names() -> None:
    assert classify("python-queue", f"{PY}/threading.py:wait", f"{PY}/queue.py:put") == (
        "backpressured"
    )


def test_multiprocessing_put_counts_only_when_blocked_in_c() -> None:
    assert classify("python-queue", MP_PUT, USER) == "backpressured"
    notify = f"{PY}/threading.py:Condition.notify"
    assert classify("python-queue", notify, MP_PUT, USER) == "busy"


def test_a_frame_regex_matches_only_at_separators() -> None:
    """``queue\\.py:put`` must not match multiprocessing's queues.py nor a file ending in it."""
    cond = f"{PY}/threading.py:Condition.wait"
    assert classify("python-queue", cond, "/srv/app/myqueue.py:Queue.put") == "busy"
    assert classify("python-queue", cond, f"{PY}/multiprocessing/queues.py:Queue.put") == "busy"


def test_stack_without_any_pattern_is_busy() -> None:
    assert classify("python-queue", USER, f"{PY}/threading.py:Thread.run") == "busy"


def test_flink_jvm_frames_match_by_class_and_method_suffix() -> None:
    lbp = "org.apache.flink.runtime.io.network.buffer.LocalBufferPool"
    park = "jdk.internal.misc.Unsafe.park"
    assert classify("flink-jvm", park, f"{lbp}.requestMemorySegmentBlocking") == "backpressured"
    gate = "org.apache.flink.runtime.io.network.partition.consumer.SingleInputGate.getChannel"
    waiting = ("java.lang.Object.wait", "java.lang.Object.wait", gate)
    assert classify("flink-jvm", *waiting) == "idle"
    assert classify("flink-jvm", "org.example.MyMap.map") == "busy"


def test_an_async_operator_waiting_for_room_in_its_queue_is_busy_not_suspended() -> None:
    """Flink's AsyncWaitOperator yields to its mailbox while its requests in flight are at the
    limit: the same mailbox wait as a suspended task, but inside addToWorkQueue."""
    ops = "org.apache.flink.streaming.api.operators"
    take = "org.apache.flink.streaming.runtime.tasks.mailbox.TaskMailboxImpl.take"
    yielding = "org.apache.flink.streaming.runtime.tasks.mailbox.MailboxExecutorImpl.yield"
    add = f"{ops}.async.AsyncWaitOperator.addToWorkQueue"
    process = f"{ops}.async.AsyncWaitOperator.processElement"
    assert classify("flink-jvm", "jdk.internal.misc.Unsafe.park", take, yielding, add, process) == (
        "busy"
    )
    assert classify("flink-jvm", "jdk.internal.misc.Unsafe.park", take) == "idle"  # suspended


def test_classes_are_checked_busy_then_backpressured_then_idle() -> None:
    profile = parse_profile(
        {
            "name": "order",
            "busy": ["app\\.py:serve"],
            "backpressured": ["app\\.py:emit"],
            "idle": ["app\\.py:emit", "app\\.py:serve"],
        },
        "<test>",
    )
    classifier = StackClassifier(profile)
    assert classifier.classify(["/x/app.py:emit", "/x/app.py:serve"]) == "busy"
    assert classifier.classify(["/x/app.py:emit"]) == "backpressured"


def test_chain_needs_consecutive_frames_and_dollar_the_innermost() -> None:
    profile = parse_profile(
        {"name": "chain", "backpressured": ["a\\.py:f > b\\.py:g"], "idle": ["c\\.py:h > $"]},
        "<test>",
    )
    classifier = StackClassifier(profile)
    assert classifier.classify(["/b.py:g", "/a.py:f"]) == "backpressured"
    assert classifier.classify(["/b.py:g", "/x.py:between", "/a.py:f"]) == "busy"
    assert classifier.classify(["/c.py:h", "/a.py:f"]) == "idle"
    assert classifier.classify(["/x.py:inner", "/c.py:h"]) == "busy"


def test_runtime_waits_and_the_service_time_settled_before_them() -> None:
    rt = "/srv/venv/lib/python3.11/site-packages/bpmon/runtime"
    main = f"{rt}/task.py:Task._main"
    wait_in = f"{rt}/task.py:Task.wait_for_input"
    assert classify("bpmon-runtime", COND_WAIT, wait_in, main) == "idle"
    assert classify("bpmon-runtime", COND_WAIT, f"{rt}/task.py:Task.wait_for_output", main) == (
        "backpressured"
    )
    request = f"{rt}/local_pool.py:LocalBufferPool.request_buffer_builder_blocking"
    assert classify("bpmon-runtime", COND_WAIT, request, main) == "backpressured"
    serve = (f"{rt}/pacing.py:ServiceTime._serve", f"{rt}/pacing.py:ServiceTime.settle")
    assert classify("bpmon-runtime", *serve, wait_in, main) == "busy"
    assert classify("bpmon-runtime", COND_WAIT, "/srv/app/task.py:wait_for_input") == "busy"


def test_thread_regex_makes_threads_subtasks() -> None:
    queue_profile = load_profile("python-queue")
    assert queue_profile.subtask_of("transform-1") == ("transform", 1)
    assert queue_profile.subtask_of("MainThread") is None
    assert queue_profile.subtask_of("Thread-3") is None
    runtime = load_profile("bpmon-runtime")
    assert runtime.subtask_of("enrich (3/4)") == ("enrich", 3)


def test_runtime_profile_ignores_threads_not_named_like_tasks() -> None:
    runtime = load_profile("bpmon-runtime")
    assert runtime.ignores("MainThread")
    assert runtime.ignores("output-flusher")
    assert not runtime.ignores("db-writer (1/2)")


# -- errors --------------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_profile(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    assert "mine.toml" in message
    return message


def test_unknown_key_is_named(tmp_path: Path) -> None:
    message = load_error(tmp_path, "name = 'x'\nbackpressured = []\nbackpresured = []\n")
    assert "unknown key 'backpresured'" in message


def test_bad_regex_names_key_and_pattern(tmp_path: Path) -> None:
    text = "name = 'x'\nbackpressured = ['ok\\.py:f', 'app\\.py:(emit > $']\n"
    message = load_error(tmp_path, text)
    assert "backpressured[1]" in message
    assert "app\\\\.py:(emit" in message  # repr of the pattern
    assert "bad regex" in message


def test_bad_thread_regex_and_missing_vertex_group(tmp_path: Path) -> None:
    assert "threads" in load_error(tmp_path, "name = 'x'\nbackpressured = []\nthreads = '('\n")
    message = load_error(tmp_path, "name = 'x'\nbackpressured = []\nthreads = '^w-\\d+$'\n")
    assert "vertex" in message


def test_wrong_types_and_missing_keys(tmp_path: Path) -> None:
    assert "expected a list of strings" in load_error(
        tmp_path, "name = 'x'\nbackpressured = 'a.py:f'\n"
    )
    assert "missing key 'name'" in load_error(tmp_path, "backpressured = []\n")
    assert "missing key 'backpressured'" in load_error(tmp_path, "name = 'x'\n")
    assert "target" in load_error(tmp_path, "name = 'x'\nbackpressured = []\ntarget = 'go'\n")


def test_malformed_chain(tmp_path: Path) -> None:
    message = load_error(tmp_path, "name = 'x'\nbackpressured = ['$ > a\\.py:f']\n")
    assert "backpressured[0]" in message


def test_invalid_toml(tmp_path: Path) -> None:
    assert "not valid TOML" in load_error(tmp_path, "name = \n")


def test_unknown_profile_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ConfigError, match="python-queue"):
        load_profile("no-such-profile")


def read(profile: str, *frames: str) -> tuple[str, bool]:
    """(state, on the data path) of one stack with a shipped profile."""
    return StackClassifier(load_profile(profile)).read(frames)


@pytest.mark.parametrize(
    "frames",
    [
        (COND_WAIT, QUEUE_GET, USER),  # waiting for input
        (QUEUE_GET, USER),  # taking an item from a non-empty queue: busy, yet on the path
        (f"{PY}/threading.py:Condition.notify", QUEUE_PUT, USER),
        (MP_PUT, USER),
        (f"{PY}/concurrent/futures/thread.py:_worker", f"{PY}/threading.py:Thread.run"),
    ],
)
def test_queue_operations_put_a_thread_on_the_data_path(frames: tuple[str, ...]) -> None:
    assert read("python-queue", *frames)[1]


@pytest.mark.parametrize(
    ("frames", "state"),
    [
        ((f"{PY}/threading.py:Event.wait", "/srv/app/main.py:main"), "idle"),
        ((f"{PY}/threading.py:Thread.join", "/srv/app/main.py:main"), "idle"),
        (("/srv/app/main.py:main", "/srv/app/main.py:<module>"), "busy"),  # in time.sleep
    ],
)
def test_waiting_or_sleeping_outside_a_queue_is_off_the_data_path(
    frames: tuple[str, ...], state: str
) -> None:
    assert read("python-queue", *frames) == (state, False)


def test_a_backpressured_stack_is_on_the_data_path_whatever_the_patterns() -> None:
    raw = {"name": "p", "backpressured": ["/a\\.py:f"], "data_path": ["/q\\.py:get"]}
    classifier = StackClassifier(parse_profile(raw, "p.toml"))
    assert classifier.read(["/a.py:f"]) == ("backpressured", True)
    assert classifier.read(["/b.py:g"]) == ("busy", False)
    assert classifier.read(["/q.py:get"]) == ("busy", True)


def test_without_data_path_patterns_every_stack_is_on_the_data_path() -> None:
    profile = parse_profile({"name": "p", "backpressured": []}, "p.toml")
    assert profile.data_path is None
    assert StackClassifier(profile).read(["/b.py:g"]) == ("busy", True)
    assert load_profile("flink-jvm").data_path is None


def test_a_bad_data_path_pattern_is_named() -> None:
    with pytest.raises(ConfigError, match=r"p\.toml: data_path\[0\]"):
        parse_profile({"name": "p", "backpressured": [], "data_path": ["(x"]}, "p.toml")


# -- chain_hop: the chain position of a busy stack -------------------------------------------

RUNTIME_HOP = "/srv/bpmon/runtime/chain.py:Chain._hand_over"
RUNTIME_RUN = "/srv/bpmon/runtime/chain.py:Chain._run"
RUNTIME_SERVE = "/srv/bpmon/runtime/chain.py:MemberService._serve"
FIXTURES = Path(__file__).parent / "flink" / "fixtures"


def test_chain_hop_is_parsed_and_absent_by_default() -> None:
    profile = parse_profile({"name": "p", "backpressured": [], "chain_hop": r"a\.py:hop"}, "p")
    assert profile.chain_hop is not None and profile.chain_hop.pattern == r"a\.py:hop"
    assert parse_profile({"name": "p", "backpressured": []}, "p").chain_hop is None
    assert load_profile("python-queue").chain_hop is None


def test_a_busy_runtime_stack_is_at_the_position_of_its_hand_over_frames() -> None:
    classifier = StackClassifier(load_profile("bpmon-runtime"))
    head = (RUNTIME_SERVE, RUNTIME_RUN)
    third = (RUNTIME_SERVE, RUNTIME_RUN, RUNTIME_HOP, RUNTIME_RUN, RUNTIME_HOP, RUNTIME_RUN)
    assert classifier.read_chain(head) == ("busy", True, 0)
    assert classifier.read_chain(third) == ("busy", True, 2)
    assert classifier.read(third) == ("busy", True)


def test_without_chain_hop_every_stack_is_at_the_head() -> None:
    classifier = StackClassifier(load_profile("python-queue"))
    assert classifier.read_chain((USER, RUNTIME_HOP, RUNTIME_HOP))[2] == 0


def test_a_bad_chain_hop_is_one_line_naming_the_key(tmp_path: Path) -> None:
    message = load_error(tmp_path, "name = 'x'\nbackpressured = []\nchain_hop = 'Output.(push'\n")
    assert "chain_hop" in message and "bad regex" in message
    message = load_error(tmp_path, "name = 'x'\nbackpressured = []\nchain_hop = ['a']\n")
    assert "chain_hop" in message and "expected a string" in message


def test_a_recorded_flink_dump_shows_a_chained_operator_one_hop_from_its_head() -> None:
    # legacy-slow-map: "Source: numbers -> parse"; the source's own thread, caught in parse's
    # output (blocked requesting a buffer) under one CopyingChainingOutput.pushToOperator.
    answer = json.loads((FIXTURES / "legacy-slow-map" / "thread-dump.json").read_text())
    threads = {t.name: t.frames for t in parse_dump(answer)}
    frames = threads[f"{LEGACY_SOURCE_THREAD}Source: numbers -> parse (1/1)#0"]
    classifier = StackClassifier(load_profile("flink-jvm"))
    assert classifier.read_chain(frames)[::2] == ("backpressured", 1)
    enrich = next(f for name, f in threads.items() if name.startswith("enrich (1/"))
    assert classifier.read_chain(enrich)[2] == 0
    assert chain_operators("Source: numbers -> parse") == ("Source: numbers", "parse")
    assert chain_operators("a -> (b -> c, d) -> e") == ("a", "(b -> c, d)", "e")
    assert chain_operators("enrich") == ()
