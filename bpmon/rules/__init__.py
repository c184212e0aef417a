"""The diagnosis: levels, bottleneck localisation on the graph, cause classification.

May import: the model layer only. Turns any ``Observation`` into a ``Report``.
"""
