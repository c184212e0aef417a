"""Another Python process as a target, read with py-spy from outside.

:mod:`~bpmon.collectors.pyspy.target` is the target, :mod:`~bpmon.collectors.pyspy.dumps` takes a
burst (one ``py-spy dump`` per sample), and :mod:`~bpmon.collectors.pyspy.ptrace` says why the
kernel refused access, with its fix.
"""
