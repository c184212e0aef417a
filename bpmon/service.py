"""The service facade: run, monitor, diagnose, history. Surfaces call only this.

May import: everything below it (history, rules, collectors, runtime, model).
"""
