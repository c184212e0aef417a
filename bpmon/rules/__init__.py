"""The diagnosis: levels, bottleneck localisation on the graph, cause classification.

Turns any ``Observation`` into a ``Report``.
"""
