"""bpmon's own counters: what its server did since it started, one typed value.

:class:`ServiceCounters` is what the watch registry (:mod:`bpmon.service.watching`) counts and
what ``/metrics`` exports (:mod:`bpmon.prometheus`): each field becomes ``bpmon_FIELD_total``
with the help text its metadata gives, so a counter and its help text cannot drift apart, and a
counter added here is exported without another edit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields


def _counter(help_text: str) -> int:
    return field(default=0, metadata={"help": help_text})


@dataclass(frozen=True, slots=True)
class ServiceCounters:
    """bpmon's own counters since its server started; each only ever grows."""

    bursts: int = _counter("Bursts of stack samples bpmon has taken since it started.")
    diagnoses: int = _counter("Reports bpmon has diagnosed (one per burst) since it started.")
    errors: int = _counter("Watches or bursts that failed with an error since bpmon started.")
    watches_started: int = _counter("Watches (of a scenario or a process) bpmon has started.")

    def items(self) -> list[tuple[str, int, str]]:
        """Each counter's name, value and help text, in the order above."""
        return [(f.name, getattr(self, f.name), f.metadata["help"]) for f in fields(self)]
