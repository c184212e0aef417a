"""Collectors: stack bursts and metric snapshots from a target, turned into an Observation."""
