"""A stop that always ends: the real ``bpmon serve`` with one of its threads frozen for real.

A thread frozen with ptrace (:mod:`.frozen`) is a thread that cannot stop: it never returns from
where it waits. Frozen, the watch's own thread leaves the watch stuck (``/healthz`` says 503) and
is left behind by the stop, which still ends in time; frozen, a thread of the pool that serves
requests (not a daemon: the interpreter waits for it at exit) holds the exit up until the timer
armed by the first signal forces it, with every thread's stack on stderr; a second signal forces
it at once. Timings are asserted with a margin for a loaded machine: FORCE_S + MARGIN_S.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from bpmon.web.stopping import FORCE_S

from .frozen import frozen, thread_ids
from .serve_process import ServeProcess, bpmon_serve
from .servers import TOKEN, WAIT_S, tiny, wait_until

MARGIN_S = 3.0
"""Slack over FORCE_S for a machine loaded by other tests."""
ATTEMPTS = 5
STUCK_AFTER_S = 8.0
"""--stuck-after: a frozen watch is stuck after this long (60 s by default)."""
POOL_THREAD = "AnyIO worker thread"
"""The name of the threads that run the app's blocking requests (anyio's, not daemons)."""

pytestmark = pytest.mark.slow


@pytest.fixture
def args(tmp_path: Path) -> list[str]:
    """The tiny scenario watched a burst every 2 s (its thread waits most of the time)."""
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(tiny())
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    runs = ["--runs-dir", str(tmp_path / "runs"), "--run", str(scenario), "--every", "2"]
    return [*runs, "--token-file", str(token_file), "--stuck-after", str(STUCK_AFTER_S)]


def _answers(child: ServeProcess) -> bool:
    try:
        return httpx.get(f"{child.url}/healthz", timeout=3).status_code in (200, 503)
    except httpx.HTTPError:
        return False


@contextmanager
def one_frozen(child: ServeProcess, name: str) -> Iterator[None]:
    """A thread of ``child`` called ``name`` frozen while the server still answers.

    A thread caught holding the GIL (or a lock the answers need) would stop the whole server:
    it is let go and another moment is tried.
    """
    for _ in range(ATTEMPTS):
        tids = thread_ids(child.process.pid, name)
        assert tids, f"no thread {name!r} in bpmon serve"
        with frozen(tids[0]):
            if _answers(child):
                yield
                return
        time.sleep(0.5)
    pytest.fail(f"could not freeze {name!r} without stopping the whole server")


def _ready(child: ServeProcess) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    def reported() -> bool:
        job = httpx.get(f"{child.url}/api/v1/jobs/tiny", headers=bearer, timeout=WAIT_S)
        return job.status_code == 200 and job.json()["latest"] is not None

    wait_until(reported, "a report of the watched job")  # also puts a thread in the pool


def _stopped(child: ServeProcess, *, again_after: str | None = None) -> tuple[int, str, float]:
    """SIGTERM (and a second one once a line says ``again_after``): code, stderr, seconds."""
    start = time.monotonic()
    child.process.send_signal(signal.SIGTERM)
    if again_after is not None:
        while True:
            child.seen.append(child.lines.get(timeout=WAIT_S))
            if again_after in child.seen[-1]:
                break
        child.process.send_signal(signal.SIGTERM)
    code = child.process.wait(timeout=WAIT_S)
    took = time.monotonic() - start
    _, lines = child.finish()
    return code, "\n".join(lines), took


def test_a_watch_whose_thread_cannot_stop_is_left_behind_in_time(
    bpmon_bin: Path, args: list[str]
) -> None:
    with bpmon_serve(bpmon_bin, *args) as child:
        _ready(child)
        with one_frozen(child, "bpmon-watch-tiny"):
            code, text, took = _stopped(child)
    assert took < FORCE_S + MARGIN_S, text
    assert code == 1, text
    assert "bpmon: stopping (at most 5 s" in text
    assert "thread bpmon-watch-tiny did not stop" in text
    assert "Timeout (" not in text and "Traceback" not in text  # ended, not forced


def test_a_thread_that_holds_the_exit_up_is_forced_out_with_every_stack(
    bpmon_bin: Path, args: list[str]
) -> None:
    with bpmon_serve(bpmon_bin, *args) as child:
        _ready(child)
        with one_frozen(child, POOL_THREAD):
            code, text, took = _stopped(child)
    assert took < FORCE_S + MARGIN_S, text
    assert code == 1, text
    # The watch stopped cleanly all the same (the app stops it on a thread of its own)...
    assert "bpmon: stopped; every watched job ended cleanly" in text
    # ...then the interpreter waited for the frozen thread, and the timer forced the exit.
    dump = text[text.index("Timeout (0:00:05)!") :]
    assert len(re.findall(r"^Thread 0x[0-9a-f]+ \(most recent call first\):$", dump, re.M)) >= 2
    assert "threading.py" in dump and "in _shutdown" in dump  # where the exit was held


def test_a_second_signal_forces_the_exit_at_once(bpmon_bin: Path, args: list[str]) -> None:
    with bpmon_serve(bpmon_bin, *args) as child:
        _ready(child)
        with one_frozen(child, POOL_THREAD):
            code, text, took = _stopped(child, again_after="bpmon: stopping")
    assert code == 1, text
    assert "bpmon: forced to exit by a second signal; the stack of every thread follows" in text
    assert "most recent call first" in text
    assert "Timeout (" not in text  # not the timer: the second signal
    assert took < FORCE_S + MARGIN_S


def test_a_stuck_watch_makes_healthz_503_naming_it_only_to_who_has_the_token(
    bpmon_bin: Path, args: list[str]
) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with bpmon_serve(bpmon_bin, *args) as child:
        _ready(child)
        with one_frozen(child, "bpmon-watch-tiny"):
            health = f"{child.url}/healthz"
            wait_until(
                lambda: httpx.get(health, timeout=WAIT_S).status_code == 503,
                "healthz to say the frozen watch is stuck",
                timeout_s=STUCK_AFTER_S + WAIT_S,
            )
            stranger = httpx.get(health, timeout=WAIT_S)
            known = httpx.get(health, headers=bearer, timeout=WAIT_S)
            code, text, _ = _stopped(child)
    assert stranger.json() == {"status": "stuck", "version": "0.1.0", "watches": 1, "stuck": 1}
    assert "tiny" not in stranger.text
    assert known.status_code == 503
    assert known.json()["watching"] == ["tiny"]
    assert [s.split(":")[0] for s in known.json()["stuck_watches"]] == ["tiny"]
    assert code == 1 and "thread bpmon-watch-tiny did not stop" in text
