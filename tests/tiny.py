"""The tiny job, the one scenario most service, web and history tests run: ``tiny-job.toml``.

A source of 2 x 200 records/s feeds a sink; ten samples 10 ms apart, no warm-up, no settling, so
a burst takes a tenth of a second.
"""

from __future__ import annotations

from pathlib import Path

TINY_JOB = Path(__file__).with_name("tiny-job.toml")
TINY = TINY_JOB.read_text()
"""The text of ``tiny-job.toml`` (job ``tiny``, the sink 50 us a record)."""


def tiny(name: str = "tiny", *, cost_us: int = 50) -> str:
    """The tiny job's text with the job called ``name`` and the sink taking ``cost_us`` a record."""
    text = _once(TINY, 'name = "tiny"', f'name = "{name}"')
    return _once(text, "cost_us = 50", f"cost_us = {cost_us}")


def _once(text: str, old: str, new: str) -> str:
    """``text`` with its one ``old`` replaced by ``new`` (an error if it is not there once)."""
    assert text.count(old) == 1, f"tiny-job.toml should have {old!r} once"
    return text.replace(old, new)
