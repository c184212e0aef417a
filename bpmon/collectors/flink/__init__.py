"""A Flink cluster as a target, through its REST API: one module per thing Flink shows.

:mod:`~bpmon.collectors.flink.target` is the target; :mod:`~bpmon.collectors.flink.rest` the
client; :mod:`~bpmon.collectors.flink.config`, :mod:`~bpmon.collectors.flink.plan`,
:mod:`~bpmon.collectors.flink.job`, :mod:`~bpmon.collectors.flink.placement`,
:mod:`~bpmon.collectors.flink.status`, :mod:`~bpmon.collectors.flink.metrics` and
:mod:`~bpmon.collectors.flink.checkpoints` read the cluster's settings, the job's graph, its
state, where its subtasks run, their metrics and the job's checkpoints;
:mod:`~bpmon.collectors.flink.burst` decides which sampler takes a window
(:mod:`~bpmon.collectors.flink.flame`: Flink's own; :mod:`~bpmon.collectors.flink.dumps`: thread
dumps) and :mod:`~bpmon.collectors.flink.readings` over which span its rates are read;
:mod:`~bpmon.collectors.flink.window` turns it into subtask windows;
:mod:`~bpmon.collectors.flink.rescale` brings a job to a parallelism for ``--verify``. Only this
package speaks Flink's REST names.
"""
