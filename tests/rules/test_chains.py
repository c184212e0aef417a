"""Chain attribution from busy samples per chain position (``rules/chains.py``), on observations
built by hand; the runtime's own chains are diagnosed end to end in tests/runtime/test_chain.py."""

from __future__ import annotations

from datetime import UTC, datetime

from bpmon.model.evidence import EvidenceLine
from bpmon.model.values import Observation, RootCause, SubtaskWindow, VertexObservation, Window
from bpmon.rules.chains import MIN_BUSY_SAMPLES, chain_share, with_chain_evidence

from .figures import texts

LINES = (EvidenceLine.of_text("busy 99%"), EvidenceLine.of_text("more"))

WINDOW = Window(
    start=datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC),
    end=datetime(2026, 11, 22, 10, 0, 5, tzinfo=UTC),
    samples=100,
    interval_ms=50.0,
)
CHAIN = ("parse", "enrich", "check")


def vertex(*per_subtask: tuple[int, ...], operators: tuple[str, ...] = CHAIN) -> VertexObservation:
    subtasks = tuple(
        SubtaskWindow(index=i, thread=f"t{i}", samples=100, busy=sum(c), chain_samples=c)
        for i, c in enumerate(per_subtask)
    )
    return VertexObservation(
        name=" -> ".join(operators),
        parallelism=len(subtasks),
        subtasks=subtasks,
        operators=operators,
    )


def diagnosed(v: VertexObservation, subtasks: tuple[int, ...] = ()) -> RootCause:
    cause = RootCause(
        v.name,
        "slow-operator",
        subtasks=subtasks,
        evidence=LINES,
    )
    obs = Observation(job="j", source="runtime", window=WINDOW, vertices=(v,))
    return with_chain_evidence([cause], obs)[0]


def test_the_operator_most_on_the_stack_is_named_with_its_share() -> None:
    cause = diagnosed(vertex((8, 40, 2), (7, 40, 3)))
    share = cause.in_chain
    assert share is not None
    assert (share.operator, share.position, share.samples, share.busy_samples) == (
        "enrich",
        1,
        80,
        100,
    )
    assert share.shares == (("parse", 0.15), ("enrich", 0.8), ("check", 0.05))
    assert texts(cause)[1] == (
        "inside the chain parse -> enrich -> check, enrich is on the stack in 80% of the busy "
        "samples (parse 15%, enrich 80%, check 5%; 100 busy samples): enrich is the operator "
        "to make cheaper, or to split off (chain = false)"
    )
    assert texts(cause)[0] == "busy 99%" and texts(cause)[2] == "more"
    figures = [(f.what, f.value) for f in cause.evidence[1].figures]
    assert figures == [("chain-share", 0.8), *[("chain-share", s) for _, s in share.shares],
                       ("chain-samples", 100)]  # fmt: skip


def test_only_the_causes_subtasks_count() -> None:
    share = diagnosed(vertex((50, 0, 0), (0, 0, 30)), subtasks=(1,)).in_chain
    assert share is not None and (share.operator, share.busy_samples) == ("check", 30)


def test_an_even_split_names_no_operator_to_fix() -> None:
    cause = diagnosed(vertex((11, 10, 10), (10, 10, 11)))
    assert cause.in_chain is not None
    assert "no operator dominates" in texts(cause)[1]
    assert "operator to make cheaper" not in texts(cause)[1]


def test_too_few_samples_or_no_chain_adds_nothing() -> None:
    few = diagnosed(vertex((MIN_BUSY_SAMPLES - 1, 0, 0)))
    assert few.in_chain is None and texts(few) == ("busy 99%", "more")
    single = diagnosed(vertex((50,), operators=("enrich",)))
    assert single.in_chain is None and texts(single) == ("busy 99%", "more")
    assert chain_share(vertex((0, 0, 0))) is None


def test_deeper_stacks_than_the_chain_has_hops_are_not_attributed() -> None:
    # the plan says two operators but stacks show a third level: the names cannot be trusted
    assert chain_share(vertex((10, 10, 10), operators=("a", "b"))) is None
