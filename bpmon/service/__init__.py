"""The service: the one layer every surface stands on.

:mod:`~bpmon.service.facade` runs a job and keeps its reports (the run loop itself is
:mod:`~bpmon.service.runloop`); :mod:`~bpmon.service.watching` keeps jobs watched for ``bpmon
serve``, :mod:`~bpmon.service.stored` sees the runs directory as jobs,
:mod:`~bpmon.service.subscriptions` fans a job's notices out to its readers;
:mod:`~bpmon.service.whatif` re-runs a scenario with settings changed,
:mod:`~bpmon.service.comparison` puts two reports side by side, and
:mod:`~bpmon.service.history` keeps the Parquet history.
"""
