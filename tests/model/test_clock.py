"""bpmon's one rule for a moment in time: a naive datetime is UTC, never the machine's local time,
and every surface writes a moment as :func:`~bpmon.model.clock.format_timestamp` does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from bpmon.model.clock import as_utc, format_timestamp


@pytest.mark.usefixtures("away_from_utc")
def test_a_naive_datetime_is_utc_whatever_the_local_zone() -> None:
    naive = datetime(2026, 11, 22, 10, 15, 2, 123_456)
    assert naive.astimezone(UTC).hour == 15, "the fixture's zone is not in force"
    assert as_utc(naive) == datetime(2026, 11, 22, 10, 15, 2, 123_456, tzinfo=UTC)
    assert format_timestamp(naive) == "2026-11-22T10:15:02.123Z"


def test_an_aware_datetime_is_converted_to_utc() -> None:
    paris = datetime(2026, 11, 22, 11, 15, 2, tzinfo=timezone(timedelta(hours=1)))
    assert as_utc(paris) == datetime(2026, 11, 22, 10, 15, 2, tzinfo=UTC)
    assert as_utc(paris).tzinfo is UTC
    assert format_timestamp(paris) == "2026-11-22T10:15:02.000Z"
