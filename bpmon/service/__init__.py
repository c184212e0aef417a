"""The service: the one layer every surface stands on.

:mod:`~bpmon.service.facade` makes the watches surfaces ask for and reads the reports they
stored; :mod:`~bpmon.service.settings` is what a watch is given, :mod:`~bpmon.service.loop` the
run loop itself and :mod:`~bpmon.service.setbacks` what it does when a burst cannot be taken.
:mod:`~bpmon.service.watching` keeps jobs watched for ``bpmon serve``,
:mod:`~bpmon.service.stored` sees the runs directory as jobs, :mod:`~bpmon.service.reports`
caches the stored reports a job's series show, :mod:`~bpmon.service.subscriptions` fans a job's
notices out to its readers; :mod:`~bpmon.service.whatif` re-runs a scenario with settings
changed, :mod:`~bpmon.service.comparison` puts two reports side by side, and
:mod:`~bpmon.service.history` keeps the Parquet history.
"""
