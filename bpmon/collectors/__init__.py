"""Collectors: stack bursts and metric snapshots from a target, turned into an Observation.

May import: the model layer and read-only views of ``bpmon.runtime``.
"""
