"""A report's ``autoscaler`` as JSON (``docs/report.md``): written and read back.

``{"config": {...the values used}, "acts", "vertices": [{"name", "load", "true_processing_rate",
"target_rate", "catch_up_rate", "parallelism", "recommended_parallelism", "outside",
"delayed"}], "verdicts": [{"vertex", "verdict", "detail"}]}``; ``null`` where the target gave no
record rates or busy time to decide from. Stdlib only: the model layer.
"""

from __future__ import annotations

from typing import Any

from bpmon.model.autoscaler import (
    VERDICT_KINDS,
    AutoscalerReport,
    AutoscalerVerdict,
    AutoscalerVertex,
)
from bpmon.model.json_fields import Fields
from bpmon.model.numbers import rounded

_RATE_DIGITS = 1
_RATIO_DIGITS = 3


def autoscaler_to_dict(report: AutoscalerReport) -> dict[str, Any]:
    """The report's ``autoscaler``, keys in the documented order."""
    return {
        "config": dict(report.config),
        "acts": report.acts,
        "vertices": [
            {
                "name": v.name,
                "load": rounded(v.load, _RATIO_DIGITS),
                "true_processing_rate": rounded(v.true_processing_rate, _RATE_DIGITS),
                "target_rate": rounded(v.target_rate, _RATE_DIGITS),
                "catch_up_rate": rounded(v.catch_up_rate, _RATE_DIGITS),
                "parallelism": v.parallelism,
                "recommended_parallelism": v.recommended_parallelism,
                "outside": v.outside,
                "delayed": v.delayed,
            }
            for v in report.vertices
        ],
        "verdicts": [
            {"vertex": v.vertex, "verdict": v.verdict, "detail": v.detail} for v in report.verdicts
        ],
    }


def autoscaler_from(f: Fields) -> AutoscalerReport:
    """A report's ``autoscaler`` read back (HistoryError names a bad field)."""
    return AutoscalerReport(
        config=f.get("config", dict),
        acts=f.get("acts", bool, False),
        vertices=tuple(
            AutoscalerVertex(
                name=v.get("name", str),
                load=v.optional_number("load"),
                true_processing_rate=v.optional_number("true_processing_rate"),
                target_rate=v.number("target_rate"),
                catch_up_rate=v.number("catch_up_rate", 0.0),
                parallelism=v.get("parallelism", int),
                recommended_parallelism=v.get("recommended_parallelism", int),
                outside=v.get("outside", bool, False),
                delayed=v.get("delayed", bool, False),
            )
            for v in f.children("vertices")
        ),
        verdicts=tuple(
            AutoscalerVerdict(
                vertex=v.get("vertex", str),
                verdict=v.choice("verdict", VERDICT_KINDS),
                detail=v.get("detail", str),
            )
            for v in f.children("verdicts")
        ),
    )
