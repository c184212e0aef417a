"""Reading one TOML table with typed getters whose errors name the file, the table and the key.

Every scenario error is one line: where it is (``slow.toml: operators[2] "enrich"``), which key, the
bad value as it is written in TOML, and what was expected. This module is the only place those
lines are phrased, so they read the same for every table.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from bpmon.model.errors import ScenarioError

T = TypeVar("T")


def show(value: object) -> str:
    """``value`` as it would be written in TOML (``true``, ``"map"``, ``3``), for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{...} (a table)"
    if isinstance(value, list):
        return "[...] (an array)"
    return str(value)


def type_name(value: object) -> str:
    """The TOML name of ``value``'s type, with its article (``a boolean``, ``an integer``)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return "a date/time"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean "x"?)`` for the closest of ``choices``, or an empty string."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{match[0]}"?)' if match else ""


def quoted(choices: Iterable[str]) -> str:
    """``"a", "b" or "c"``: a list of allowed words for a message."""
    words = [json.dumps(c) for c in choices]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


class Table:
    """One TOML table being read; ``where`` prefixes every error (``slow.toml: [network]``).

    Getters return ``None`` for a missing key so that callers decide between a default and
    :meth:`require`; a present key of the wrong type or out of range is an error at once.
    """

    def __init__(self, data: Mapping[str, object], where: str) -> None:
        self.data = data
        self.where = where

    def error(self, message: str) -> ScenarioError:
        """A :class:`ScenarioError` located at this table."""
        return ScenarioError(f"{self.where}: {message}")

    def key_error(self, key: str, expected: str) -> ScenarioError:
        """``key "k" = <value>: expected <expected>`` for a present key."""
        return self.error(f'key "{key}" = {show(self.data[key])}: expected {expected}')

    def has(self, key: str) -> bool:
        """Whether ``key`` is written in the table."""
        return key in self.data

    def check_keys(self, allowed: Sequence[str]) -> None:
        """Reject any key not in ``allowed``: a typo must not silently change the experiment."""
        for key in self.data:
            if key not in allowed:
                raise self.error(
                    f'unknown key "{key}"{did_you_mean(key, allowed)}; '
                    f"valid keys: {', '.join(allowed)}"
                )

    def require(self, key: str, value: T | None, what: str) -> T:
        """``value`` if the key was present, else a "missing required key" error."""
        if value is None:
            raise self.error(f'missing required key "{key}" ({what})')
        return value

    def string(self, key: str, choices: Sequence[str] | None = None) -> str | None:
        """A string value, optionally one of ``choices``; ``None`` when absent."""
        if key not in self.data:
            return None
        value = self.data[key]
        expected = f"one of {quoted(choices)}" if choices else "a string"
        if not isinstance(value, str):
            raise self.key_error(key, f"{expected}, got {type_name(value)}")
        if choices is not None and value not in choices:
            raise self.key_error(key, expected + did_you_mean(value, choices))
        return value

    def boolean(self, key: str) -> bool | None:
        """A boolean value; ``None`` when absent."""
        if key not in self.data:
            return None
        value = self.data[key]
        if not isinstance(value, bool):
            raise self.key_error(key, f"true or false, got {type_name(value)}")
        return value

    def integer(self, key: str, minimum: int | None = None) -> int | None:
        """An integer value (a boolean is not one), at least ``minimum``; ``None`` when absent."""
        if key not in self.data:
            return None
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.key_error(key, f"an integer, got {type_name(value)}")
        if minimum is not None and value < minimum:
            raise self.key_error(key, f"an integer >= {minimum}")
        return value

    def number(
        self,
        key: str,
        minimum: float | None = None,
        maximum: float | None = None,
        *,
        above_minimum: bool = False,
    ) -> float | None:
        """A finite integer or float in range, as a float; ``None`` when absent.

        Args:
            key: the key to read.
            minimum: lowest allowed value (inclusive unless ``above_minimum``).
            maximum: highest allowed value, inclusive.
            above_minimum: the value must be strictly greater than ``minimum``.
        """
        if key not in self.data:
            return None
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.key_error(key, f"a number, got {type_name(value)}")
        if not math.isfinite(value):
            raise self.key_error(key, "a finite number")
        check_range(self, key, float(value), minimum, maximum, above_minimum=above_minimum)
        return float(value)

    def table(self, key: str) -> Mapping[str, object] | None:
        """A sub-table (``[network]`` or an inline ``{ ... }``); ``None`` when absent."""
        if key not in self.data:
            return None
        value = self.data[key]
        if not isinstance(value, Mapping):
            raise self.key_error(key, f"a table, got {type_name(value)}")
        return value

    def tables(self, key: str, example: str) -> list[Mapping[str, object]] | None:
        """An array of tables (``[[operators]]`` or ``[{ ... }]``); ``None`` when absent."""
        if key not in self.data:
            return None
        value = self.data[key]
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise self.key_error(key, f"an array of tables: {example}")
        return list(value)


def check_range(
    table: Table,
    key: str,
    value: float,
    minimum: float | None,
    maximum: float | None,
    *,
    above_minimum: bool,
) -> None:
    """Raise the table's error unless ``value`` lies in the described range."""
    too_low = minimum is not None and (value <= minimum if above_minimum else value < minimum)
    too_high = maximum is not None and value > maximum
    if not (too_low or too_high):
        return
    if minimum is not None and maximum is not None:
        expected = f"a number from {minimum:g} to {maximum:g}"
    elif minimum is not None:
        expected = f"a number {'>' if above_minimum else '>='} {minimum:g}"
    else:
        expected = f"a number <= {maximum:g}"
    raise table.key_error(key, expected)
