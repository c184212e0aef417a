"""The dashboard's one Jinja2 environment: templates from ``bpmon/web/templates``, autoescaped.

Every value a template prints is escaped unless it is :class:`markupsafe.Markup` already (the
output of another template or macro), so escaping is the default rather than a discipline: Python
code hands templates plain values (reports, strings, numbers), never HTML it built itself.

Templates are written one element per line, for reading; a line break and the indentation after
it are not sent (:meth:`_Environment.preprocess` turns them into a Jinja comment, so an error still
names its line), and the HTML is as compact as a hand-built string: a table row is one line. Text
that needs a space keeps it on one line. The environment is made once (templates compile once).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from bpmon.model.values import worst_level
from bpmon.web import formats

_TAGS = re.compile(r"(\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\})", re.DOTALL)
_LINE_BREAK = re.compile(r"\n([ \t]*)")


class _Environment(Environment):
    """An environment whose templates' line breaks, with the indentation after them, are
    comments: not sent, but still counted in the lines an error names."""

    def preprocess(self, source: str, name: str | None = None, filename: str | None = None) -> str:
        """``source`` with each line break outside a tag, and its indentation, in a comment."""
        parts = _TAGS.split(source)  # text at even places, Jinja's tags at odd ones
        parts[::2] = [_LINE_BREAK.sub(r"{#\n\1#}", text) for text in parts[::2]]
        return super().preprocess("".join(parts), name, filename)


def path_part(text: str) -> str:
    """``text`` quoted for one segment of a URL path (or a query value)."""
    return quote(text, safe="")


@cache
def environment() -> Environment:
    """The environment (made once): autoescaping on, undefined names an error, the filters the
    pages format figures with (``ratio``, ``rate``, ``when``, ``iso``, ``counted``, ``path``,
    ``level_word``, ``worst_level``)."""
    env = _Environment(
        loader=PackageLoader("bpmon.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        auto_reload=False,
    )
    env.filters.update(
        ratio=formats.ratio,
        rate=formats.rate,
        when=formats.when,
        iso=formats.iso,
        counted=formats.counted,
        path=path_part,
        level_word=lambda level: formats.LEVEL_WORDS[level],
        worst_level=worst_level,
    )
    # tojson escapes <, >, & and ' (no text inside can close the script block it is put in).
    env.policies["json.dumps_kwargs"] = {"separators": (",", ":"), "allow_nan": False}
    return env


def render(name: str, **values: Any) -> str:
    """Template ``name`` rendered with ``values``."""
    return environment().get_template(name).render(**values)


def macro(name: str, macro_name: str, *args: Any, **kwargs: Any) -> Markup:
    """Macro ``macro_name`` of template ``name`` called with these arguments: a fragment of a
    page that is also sent alone (the Job page's live parts)."""
    called = getattr(environment().get_template(name).module, macro_name)
    return Markup(called(*args, **kwargs))
