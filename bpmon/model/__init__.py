"""The model: what crosses a layer, and the small things every layer shares.

:mod:`~bpmon.model.values` holds the frozen values (an :class:`~bpmon.model.values.Observation`
in, a :class:`~bpmon.model.values.Report` out); :mod:`~bpmon.model.signals` what a target can
observe; :mod:`~bpmon.model.evidence` a root cause's evidence lines with the figures they state;
:mod:`~bpmon.model.events` what a watch hands the surfaces; :mod:`~bpmon.model.errors`
every error a user can meet; :mod:`~bpmon.model.report_json` and :mod:`~bpmon.model.analysis`
the JSON of a report and of a history's analysis; :mod:`~bpmon.model.capacity`,
:mod:`~bpmon.model.clock`, :mod:`~bpmon.model.numbers` and :mod:`~bpmon.model.datafiles` one
definition each of a capacity, the time, how a figure reads and where a data file is found.
Standard library only.
"""
