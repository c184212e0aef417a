"""The CLI's --help at 80 columns: one placeholder style and sentences that wrap as prose.

typer 0.29 shows ``<bool>`` after every flag, ``<int>``/``<path>`` beside ``URL`` or ``SECONDS``,
and keeps a docstring's line breaks after its first paragraph, so a sentence broke where the
source's line did. The command classes here fix all three for every command of ``bpmon``.
"""

from __future__ import annotations

import inspect
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


def plain_placeholders(params: list[Any]) -> list[Any]:
    """One placeholder style in --help: a flag shows none (typer would say ``<bool>``), every
    value its name in capitals (``--samples SAMPLES``, like ``URL`` or ``SECONDS``), and an
    argument its name alone (``{SCENARIO}``, ``{RUN}``)."""
    for param in params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
        elif param.metavar is None and param.name:
            param.metavar = param.name.upper()
        if param.param_type_name == "argument":
            setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010 - an instance's own
    return params


def unwrapped(text: str | None) -> str | None:
    """``text`` with each paragraph on one line: typer keeps a docstring's line breaks after its
    first paragraph, so at 80 columns a sentence broke where the source did, mid-way."""
    if text is None:
        return None
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


class PlainCommand(TyperCommand):
    """A command whose --help uses :func:`plain_placeholders` and :func:`unwrapped` text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help, self.epilog = unwrapped(self.help), unwrapped(self.epilog)

    def get_params(self, ctx: Any) -> list[Any]:
        return plain_placeholders(super().get_params(ctx))


class PlainGroup(TyperGroup):
    """A command group whose --help uses :func:`plain_placeholders` and :func:`unwrapped`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help, self.epilog = unwrapped(self.help), unwrapped(self.epilog)

    def get_params(self, ctx: Any) -> list[Any]:
        return plain_placeholders(super().get_params(ctx))


def use_plain_help(*apps: typer.Typer) -> None:
    """Make every command registered on ``apps`` a :class:`PlainCommand` (groups are made
    with ``cls=PlainGroup``)."""
    for app in apps:
        for info in app.registered_commands:
            if info.cls in (None, TyperCommand):
                info.cls = PlainCommand
