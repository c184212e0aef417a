"""A JSON document being read, field by field, with one-line errors naming the field.

The report (:mod:`bpmon.model.report_json`) and its parts (:mod:`bpmon.model.checkpoint_json`) are
read through :class:`Fields`: each value is checked for its type as it is taken, and a wrong one
is a :class:`~bpmon.model.errors.HistoryError` naming its dotted path
(``vertices[1].parallelism``) and the value. Stdlib only: the model layer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from bpmon.model.errors import HistoryError

T = TypeVar("T")

MISSING = object()
TYPE_NAMES: Mapping[type, str] = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    list: "a list",
    dict: "an object",
}


def bad(field: str, value: object, expected: str) -> HistoryError:
    """The one-line error for a field with a wrong value (long values are cut short)."""
    shown = json.dumps(value, ensure_ascii=False, default=repr)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return HistoryError(f"malformed report: {field} = {shown}: {expected}")


def typed(value: object, kind: type[T], field: str) -> T:
    """``value`` if it is of ``kind`` (a bool is not an integer); HistoryError otherwise."""
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise bad(field, value, f"expected {TYPE_NAMES.get(kind, kind.__name__)}")


class Fields:
    """A JSON object being read, with the dotted path that names it in error messages."""

    def __init__(self, doc: object, where: str) -> None:
        self.where = where
        self.doc: dict[str, Any] = typed(doc, dict, where)

    def path(self, key: str) -> str:
        """The full name of ``key`` in this object, e.g. ``vertices[1].parallelism``."""
        return key if self.where == "report" else f"{self.where}.{key}"

    def get(self, key: str, kind: type[T], default: object = MISSING) -> T:
        """The value of ``key``, of type ``kind``; ``default`` (if given) when it is absent."""
        if key not in self.doc:
            if default is MISSING:
                raise HistoryError(f"malformed report: {self.path(key)} is missing")
            return cast(T, default)
        return typed(self.doc[key], kind, self.path(key))

    def optional(self, key: str, kind: type[T]) -> T | None:
        """The value of ``key``, or None when it is absent or null."""
        value = self.doc.get(key)
        return None if value is None else typed(value, kind, self.path(key))

    def optional_number(self, key: str) -> float | None:
        """A number that may be absent or null (a value the source could not give)."""
        value = self.doc.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad(self.path(key), value, "expected a number or null")
        return float(value)

    def number(self, key: str, default: float | None = None) -> float:
        """A number that cannot be None in the model: ``null`` (a NaN when written) reads as NaN."""
        if key not in self.doc and default is not None:
            return default
        if key not in self.doc:
            raise HistoryError(f"malformed report: {self.path(key)} is missing")
        value = self.optional_number(key)
        return math.nan if value is None else value

    def choice(self, key: str, allowed: tuple[T, ...]) -> T:
        """A string that must be one of ``allowed``."""
        value = self.get(key, str)
        return self._among(key, value, allowed)

    def optional_choice(self, key: str, allowed: tuple[T, ...]) -> T | None:
        """A string among ``allowed``, or None when absent or null."""
        value = self.optional(key, str)
        return None if value is None else self._among(key, value, allowed)

    def _among(self, key: str, value: str, allowed: tuple[T, ...]) -> T:
        for option in allowed:
            if option == value:
                return option
        raise bad(self.path(key), value, "expected one of " + ", ".join(map(str, allowed)))

    def has(self, key: str) -> bool:
        """Whether the object has ``key`` with a value other than null."""
        return self.doc.get(key) is not None

    def child(self, key: str) -> Fields:
        """The object under ``key``."""
        return Fields(self.get(key, dict), self.path(key))

    def children(self, key: str, *, required: bool = True) -> list[Fields]:
        """The objects of the list under ``key`` (an absent list is empty unless required)."""
        items = self.get(key, list) if required else self.get(key, list, [])
        return [Fields(item, f"{self.path(key)}[{n}]") for n, item in enumerate(items)]
