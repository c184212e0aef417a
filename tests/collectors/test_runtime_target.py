"""The runtime target watches its own job alone, however many jobs share the process.

``bpmon serve --run demo --run fan-in`` runs both jobs in one process; both have a vertex named
``sink`` with one subtask, so both have a thread named ``sink (1/1)``. Each watch's bursts must
count its own job's threads only: the other job's ``sink (1/1)`` is not a second subtask.
"""

from __future__ import annotations

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.scenario import load_example
from tests.waiting import wait_until


def test_a_job_beside_another_with_the_same_vertex_names_sees_only_its_own_threads() -> None:
    demo, fan_in = RuntimeTarget(load_example("demo")), RuntimeTarget(load_example("fan-in"))
    shared = {o.name for o in demo.scenario.operators} & {o.name for o in fan_in.scenario.operators}
    assert "sink" in shared
    demo.start()
    fan_in.start()
    try:
        tasks = [*demo.runtime.all_tasks(), *fan_in.runtime.all_tasks()]
        wait_until(
            lambda: [t.name for t in tasks if not t.thread.is_alive()],
            "every task of both jobs to run",
            until=lambda waiting: not waiting,
        )
        observed = demo.observe(samples=10, interval_ms=20)
    finally:
        assert not demo.stop().leaks
        assert not fan_in.stop().leaks
    mine = {t.name for t in demo.runtime.all_tasks()}
    for vertex in observed.vertices:
        spec = next(o for o in demo.scenario.operators if o.name == vertex.name)
        assert vertex.parallelism == spec.parallelism, vertex
        assert {s.thread for s in vertex.subtasks} <= mine
        assert all(s.samples == 10 for s in vertex.subtasks), vertex  # one thread each
