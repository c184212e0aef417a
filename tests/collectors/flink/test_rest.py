"""The REST client's retries: a real HTTP server answering HTTP 503s, slowly, or not at all, and
bpmon's client as it runs against a real JobManager (``fake_flink.py``)."""

from __future__ import annotations

import re

import pytest

from bpmon.collectors.flink import rest as flink_rest
from bpmon.collectors.flink.rest import RETRY_DELAYS_S, FlinkRest, NotFoundError
from bpmon.model.errors import CollectorError, UnavailableError

from .cluster import free_port
from .fake_flink import Script, serving

BUSY = (503, {"errors": ["Service temporarily unavailable due to an ongoing leader election."]})


def client(url: str, timeout_s: float = 5.0) -> tuple[FlinkRest, list[float]]:
    """A client whose pauses between attempts are recorded (and not slept)."""
    pauses: list[float] = []
    return FlinkRest(url, timeout_s, sleep=pauses.append), pauses


def test_a_5xx_is_tried_again_after_each_pause_until_it_answers() -> None:
    script = Script({"/jobs/overview": (200, {"jobs": []})})
    script.queued["/jobs/overview"] = [BUSY, (500, {"errors": ["boom"]})]
    with serving(script) as url:
        rest, pauses = client(url)
        assert rest.get("/jobs/overview") == {"jobs": []}
    assert script.count("/jobs/overview") == 3
    assert pauses == list(RETRY_DELAYS_S[:2])
    assert rest.cost.requests == 3  # the failed attempts are requests too


def test_a_5xx_every_time_is_one_line_saying_what_and_how_often() -> None:
    script = Script({"/jobs/x/status": BUSY})
    with serving(script) as url:
        rest, pauses = client(url)
        with pytest.raises(UnavailableError) as caught:
            rest.get("/jobs/x/status")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"Flink at {url} answered HTTP 503 (Service temporarily unavailable due to an ongoing "
        "leader election.) to GET /jobs/x/status, 4 times in "
    )
    assert message.endswith("; check the JobManager's log; bpmon tries again")
    assert pauses == list(RETRY_DELAYS_S)
    assert script.count("/jobs/x/status") == 4


@pytest.mark.parametrize(("status", "error"), [(404, NotFoundError), (400, CollectorError)])
def test_a_4xx_is_an_answer_and_never_tried_again(status: int, error: type[Exception]) -> None:
    script = Script({"/jobs/x": (status, {"errors": ["nope"]})})
    with serving(script) as url:
        rest, pauses = client(url)
        with pytest.raises(error) as caught:
            rest.get("/jobs/x")
    assert not isinstance(caught.value, UnavailableError)
    assert script.count("/jobs/x") == 1 and pauses == []


def test_a_request_that_times_out_is_tried_again() -> None:
    script = Script({"/slow": (200, {})}, delay_s={"/slow": 1.0})
    with serving(script) as url:
        rest, pauses = client(url, timeout_s=0.2)
        with pytest.raises(UnavailableError, match=r"did not answer GET /slow within 0.2 s, 4 "):
            rest.get("/slow")
    assert len(pauses) == 3


def test_no_attempt_starts_once_the_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hung JobManager costs two timeouts at most, not four."""
    monkeypatch.setattr(flink_rest, "RETRY_BUDGET_S", 1.0)
    script = Script({"/slow": (200, {})}, delay_s={"/slow": 2.0})
    with serving(script) as url:
        rest, _ = client(url, timeout_s=0.3)  # the third would start at 0.6 s + 0.5 s of pause
        with pytest.raises(UnavailableError, match=r"within 0.3 s, 2 times"):
            rest.get("/slow")


def test_nothing_listening_is_a_gap_while_watching_and_an_error_at_first_contact() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    rest, pauses = client(url)
    with pytest.raises(UnavailableError, match=r"connection refused: nothing listens there"):
        rest.get("/jobs/overview")
    assert len(pauses) == 3
    rest, pauses = client(url)
    with pytest.raises(CollectorError) as caught:
        rest.get("/config", retry=False)
    assert not isinstance(caught.value, UnavailableError)
    assert re.match(rf"cannot reach Flink at {url} \(connection refused", str(caught.value))
    assert pauses == []


def test_a_5xx_at_first_contact_is_not_tried_again() -> None:
    script = Script({"/config": BUSY})
    with serving(script) as url:
        rest, pauses = client(url)
        with pytest.raises(CollectorError, match=r"answered GET /config with HTTP 503") as caught:
            rest.get("/config", retry=False)
    assert not isinstance(caught.value, UnavailableError)
    assert script.count("/config") == 1 and pauses == []
