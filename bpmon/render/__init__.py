"""Reports and analyses shown to people, in a terminal or as Markdown.

:mod:`~bpmon.render.report` renders one report (rich text, Markdown, the spec's JSON),
:mod:`~bpmon.render.analysis` a history's analysis, :mod:`~bpmon.render.listing` the CLI's
listings, :mod:`~bpmon.render.liveview` the live table of a running watch, and
:mod:`~bpmon.render.fit` fits every table to the terminal.
"""
