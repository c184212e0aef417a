"""Which operators chain into one task, and the task's name, as Flink's job graph generator decides.

Flink's ``StreamingJobGraphGenerator.isChainable`` chains an edge into its producer's task when
chaining is on and: the consumer has that one input; both ends are in one slot sharing group and
have one parallelism; the edge is forward and pipelined (a batch exchange never chains); and the
consumer's chaining strategy allows it (``chain = false`` is Flink's ``startNewChain()`` /
``disableChaining()``). Nothing limits the producer's outputs: an operator feeding several others
is chained to each consumer that passes, so a chain is a tree from its head (a *branching* chain),
and an operator's other outputs leave the task through result partitions as any task's do.

Flink names the task after its head, recursively (``createChainedName``): an operator with one
chained consumer is ``"a -> " + name(consumer)``, one with several is
``"a -> (" + ", ".join(names) + ")"`` in the order of its outputs (the order the program
declared its consumers: file order here), so ``a`` chained to ``b`` (itself chained to ``d``) and
``c`` is ``"a -> (b -> d, c)"``. :func:`operator_names` reads the operators back from a name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

CHAIN_SEPARATOR = " -> "
"""How a chained vertex is named from its operators (Flink's ``"map -> filter"``)."""

_PUNCTUATION = re.compile(r"\s*->\s*|\s*,\s*|[()]")


def chain_heads(order: Sequence[str], chained_input: Callable[[str], str | None]) -> dict[str, str]:
    """Each operator's chain head, given ``chained_input(name)``: the operator ``name`` is
    chained to (None: it starts a task). ``order`` is topological."""
    head: dict[str, str] = {}
    for name in order:
        parent = chained_input(name)
        head[name] = name if parent is None else head[parent]
    return head


def chain_name(head: str, children: Mapping[str, Sequence[str]]) -> str:
    """Flink's name of the task whose head is ``head``; ``children`` lists each operator's
    chained consumers in the order of its outputs."""
    below = [chain_name(child, children) for child in children.get(head, ())]
    if len(below) > 1:
        return f"{head}{CHAIN_SEPARATOR}({', '.join(below)})"
    if below:
        return f"{head}{CHAIN_SEPARATOR}{below[0]}"
    return head


def operator_names(vertex: str) -> tuple[str, ...]:
    """The operators a vertex name joins, in the order written: ``"a -> (b -> d, c)"`` gives
    ``("a", "b", "d", "c")``; one operator's name gives itself. Operator names carry no spaces,
    commas or parentheses (``[A-Za-z0-9_.-]+``), so the name splits without ambiguity."""
    return tuple(part for part in _PUNCTUATION.split(vertex) if part)
