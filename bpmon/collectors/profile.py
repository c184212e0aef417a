"""Collector profiles (``collectors/*.toml``): what a thread's stack means for one kind of target.

A profile is data, not code: ordered lists of stack patterns that make a stack sample
*backpressured* or *idle* (anything else is *busy*), thread names to leave out, and the thread-name
regex that turns a thread into a subtask of a vertex, and the frames of the *data path* (a thread
seen in one of them exchanges records with other stages; one never seen there, such as a main
thread sleeping to keep a program alive, is never blamed as a bottleneck), and the frame of one
hop of an operator chain (``chain_hop``: a busy stack showing ``k`` of them is at the chain's
``k``-th operator after the head). The file format is
documented in the shipped profiles themselves (``collectors/python-queue.toml`` describes it).

Frames are written ``path:qualname`` for Python (innermost frame first in a stack) and
``package.Class.method`` for the JVM. A frame regex matches a frame when it matches, in full, the
frame or a *suffix* of it cut at a separator: leading path components (``/``) and leading
qualified-name components (``.``) may be dropped. So ``queue\\.py:put`` matches
``/usr/lib/python3.11/queue.py:Queue.put`` and also py-spy 0.3's ``.../queue.py:put``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bpmon.model.datafiles import data_file
from bpmon.model.errors import ConfigError
from bpmon.model.values import SampleState

FrameNotation = Literal["python", "jvm"]
CHAIN_SEPARATOR = " > "
INNERMOST = "$"
_STATE_KEYS: tuple[SampleState, ...] = ("busy", "backpressured", "idle")
_KEYS = (
    "name",
    "description",
    "target",
    "threads",
    "ignore",
    *_STATE_KEYS,
    "data_path",
    "suspended",
    "chain_hop",
)
_CACHE_LIMIT = 50_000


@dataclass(frozen=True, slots=True)
class StackPattern:
    """One stack pattern: frame regexes matching consecutive frames, caller first.

    Attributes:
        text: the pattern as written in the profile (``a > b``, or ``a > $``).
        frames: one compiled regex per frame, the caller first.
        innermost: the last frame regex must match the innermost frame (written ``> $``).
    """

    text: str
    frames: tuple[re.Pattern[str], ...]
    innermost: bool = False


@dataclass(frozen=True, slots=True)
class Profile:
    """A loaded collector profile; see the module docstring and ``collectors/*.toml``.

    Attributes:
        name: the profile's name (``python-queue``).
        description: one paragraph on what it is for.
        target: the frame notation of its stacks: ``python`` or ``jvm``.
        threads: thread-name regex with a ``vertex`` group (and optionally ``index``) that makes
            a thread a subtask of a vertex; ``None`` = every thread is its own vertex.
        ignore: thread-name regexes of threads the collectors leave out.
        busy: patterns that make a sample busy whatever else the stack shows (checked first).
        backpressured: patterns of a thread blocked on its output (checked second).
        idle: patterns of a thread waiting for input (checked last).
        path: the file it came from, if any.
        data_path: patterns of a stack exchanging records (a queue's get or put): a thread whose
            stack matched one, or that was backpressured, in any sample is on the data path.
            ``None`` (the key is absent): the profile cannot tell, so every thread is.
        suspended: patterns of a thread waiting for EITHER input or output, which its stack
            cannot tell apart (a Flink task suspended in its mailbox). They count as idle; a
            collector with the target's time accounting may split them (the Flink collector).
        chain_hop: the frame regex of one hop of an operator chain, where one chained operator
            hands a record to the next (Flink's ``ChainingOutput.pushToOperator``); a stack
            sample shows one per operator the record has passed. None: chains are not read.
    """

    name: str
    description: str
    target: FrameNotation
    threads: re.Pattern[str] | None
    ignore: tuple[re.Pattern[str], ...]
    busy: tuple[StackPattern, ...]
    backpressured: tuple[StackPattern, ...]
    idle: tuple[StackPattern, ...]
    path: Path | None = None
    data_path: tuple[StackPattern, ...] | None = None
    suspended: tuple[StackPattern, ...] = ()
    chain_hop: re.Pattern[str] | None = None

    def ignores(self, thread_name: str) -> bool:
        """Whether the collectors leave the thread called ``thread_name`` out."""
        return any(p.search(thread_name) for p in self.ignore)

    def subtask_of(self, thread_name: str) -> tuple[str, int | None] | None:
        """``(vertex, index or None)`` by the ``threads`` regex; None when it does not match."""
        if self.threads is None:
            return None
        found = self.threads.search(thread_name)
        if found is None:
            return None
        index = found.groupdict().get("index")
        return found.group("vertex"), int(index) if index and index.isdigit() else None

    def patterns(self) -> tuple[tuple[SampleState, StackPattern], ...]:
        """Every pattern with the state it gives, in the order they are checked."""
        ordered: list[tuple[SampleState, StackPattern]] = []
        for state, group in zip(
            _STATE_KEYS, (self.busy, self.backpressured, self.idle), strict=True
        ):
            ordered.extend((state, p) for p in group)
        ordered.extend(("idle", p) for p in self.suspended)
        return tuple(ordered)


def frame_suffixes(frame: str, notation: FrameNotation) -> tuple[str, ...]:
    """Every way of writing ``frame`` that a frame regex may match, the full text first."""
    if notation == "jvm":
        parts = frame.split(".")
        return tuple(".".join(parts[i:]) for i in range(len(parts)))
    path, sep, qualname = frame.rpartition(":")
    if not sep:
        path, qualname = frame, ""
    dirs = re.split(r"[/\\]", path)
    paths = [path, *("/".join(dirs[i:]) for i in range(1, len(dirs)))]
    names = qualname.split(".")
    quals = [".".join(names[i:]) for i in range(len(names))]
    return tuple(f"{p}:{q}" for p in paths if p for q in quals)


class StackClassifier:
    """Classifies stacks (frame texts, innermost first) with one profile.

    Results are cached per distinct frame and per distinct stack, so a steady pipeline costs one
    dictionary lookup per thread and sample. Not thread-safe: one classifier per sampler.
    """

    def __init__(self, profile: Profile) -> None:
        """Prepare the cache for ``profile``."""
        self.profile = profile
        self._patterns = profile.patterns()
        self._data_path = profile.data_path
        data_rx = [rx for p in (*(self._data_path or ()), *profile.suspended) for rx in p.frames]
        hop = [profile.chain_hop] if profile.chain_hop is not None else []
        elements = [rx for _, p in self._patterns for rx in p.frames] + data_rx + hop
        self._elements: tuple[re.Pattern[str], ...] = tuple(dict.fromkeys(elements))
        self._element_id = {rx: i for i, rx in enumerate(self._elements)}
        self._hop = self._element_id[profile.chain_hop] if profile.chain_hop is not None else None
        self._frames: dict[str, frozenset[int]] = {}
        self._stacks: dict[tuple[str, ...], tuple[SampleState, bool, int]] = {}

    def classify(self, frames: Sequence[str]) -> SampleState:
        """The state of one sample of a thread whose stack is ``frames`` (innermost first)."""
        return self.read(frames)[0]

    def read(self, frames: Sequence[str]) -> tuple[SampleState, bool]:
        """The state of one sample, and whether it shows the thread on the data path.

        On the data path: backpressured, or a frame matching a ``data_path`` pattern; always
        when the profile has no ``data_path`` key (it cannot tell).
        """
        state, on_path, _ = self.read_chain(frames)
        return state, on_path

    def read_chain(self, frames: Sequence[str]) -> tuple[SampleState, bool, int]:
        """:meth:`read`, and the chain position the stack is at: how many of its frames match
        the profile's ``chain_hop`` (0 without one: the chain's head, or no chain)."""
        key = tuple(frames)
        found = self._stacks.get(key)
        if found is None:
            matched = [self._frame_matches(f) for f in key]
            state = self._classify(matched)
            on_path = self._data_path is None or state == "backpressured"
            on_path = on_path or any(self._matches(p, matched) for p in self._data_path or ())
            hop = self._hop
            depth = 0 if hop is None else sum(hop in ids for ids in matched)
            found = (state, on_path, depth)
            if len(self._stacks) >= _CACHE_LIMIT:
                self._stacks.clear()
            self._stacks[key] = found
        return found

    def suspended(self, frames: Sequence[str]) -> bool:
        """Whether the stack matches one of the profile's ``suspended`` patterns."""
        matched = [self._frame_matches(f) for f in frames]
        return any(self._matches(p, matched) for p in self.profile.suspended)

    def _classify(self, matched: list[frozenset[int]]) -> SampleState:
        for state, pattern in self._patterns:
            if self._matches(pattern, matched):
                return state
        return "busy"

    def _matches(self, pattern: StackPattern, matched: list[frozenset[int]]) -> bool:
        """Whether ``pattern`` matches consecutive frames (``matched``: ids per frame)."""
        ids = [self._element_id[rx] for rx in reversed(pattern.frames)]  # innermost side first
        if len(ids) > len(matched):
            return False
        last_start = 0 if pattern.innermost else len(matched) - len(ids)
        return any(
            all(e in matched[start + k] for k, e in enumerate(ids))
            for start in range(last_start + 1)
        )

    def _frame_matches(self, frame: str) -> frozenset[int]:
        found = self._frames.get(frame)
        if found is None:
            texts = frame_suffixes(frame, self.profile.target)
            found = frozenset(
                i for i, rx in enumerate(self._elements) if any(rx.fullmatch(t) for t in texts)
            )
            if len(self._frames) >= _CACHE_LIMIT:
                self._frames.clear()
            self._frames[frame] = found
        return found


def load_profile(name_or_path: str | Path) -> Profile:
    """Load a shipped profile by name (``python-queue``) or a profile file by path.

    Raises:
        ConfigError: no such profile, not TOML, or a bad key or value (one line naming it).
    """
    path = data_file("collectors", str(name_or_path))
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read the profile ({err}); check the file") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}; fix the syntax") from None
    return parse_profile(raw, str(path), path=path)


def parse_profile(raw: Mapping[str, object], where: str, path: Path | None = None) -> Profile:
    """Build a :class:`Profile` from a parsed TOML table; ``where`` names it in errors."""
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; a profile has only {', '.join(_KEYS)}"
        )
    name = _string(raw, "name", where, required=True)
    target = _string(raw, "target", where) or "python"
    if target not in ("python", "jvm"):
        raise ConfigError(f'{where}: target = {target!r}: expected "python" or "jvm"')
    if "backpressured" not in raw:
        raise ConfigError(
            f"{where}: missing key 'backpressured': list the stack patterns "
            "of a thread blocked on its output"
        )
    threads_text = _string(raw, "threads", where)
    threads = _regex(threads_text, f"{where}: threads") if threads_text else None
    if threads is not None and "vertex" not in threads.groupindex:
        raise ConfigError(
            f"{where}: threads = {threads_text!r} has no (?P<vertex>...) group; "
            "name the part of the thread name that is the vertex"
        )
    ignore = tuple(
        _regex(t, f"{where}: ignore[{i}]") for i, t in enumerate(_strings(raw, "ignore", where))
    )
    groups = {key: _patterns(raw, key, where) for key in _STATE_KEYS}
    data_path = _patterns(raw, "data_path", where) if "data_path" in raw else None
    hop_text = _string(raw, "chain_hop", where)
    chain_hop = _regex(hop_text, f"{where}: chain_hop") if hop_text else None
    return Profile(
        name=name,
        description=_string(raw, "description", where),
        target="jvm" if target == "jvm" else "python",
        threads=threads,
        ignore=ignore,
        busy=groups["busy"],
        backpressured=groups["backpressured"],
        idle=groups["idle"],
        path=path,
        data_path=data_path,
        suspended=_patterns(raw, "suspended", where),
        chain_hop=chain_hop,
    )


def parse_pattern(text: str, where: str = "<pattern>") -> StackPattern:
    """Compile one stack pattern (``a > b > $``); ``where`` names it in errors."""
    parts = [p.strip() for p in text.split(CHAIN_SEPARATOR)]
    innermost = len(parts) > 1 and parts[-1] == INNERMOST
    if innermost:
        parts.pop()
    for part in parts:
        if not part or part == INNERMOST:
            raise ConfigError(
                f"{where} = {text!r}: expected frame regexes joined by {CHAIN_SEPARATOR.strip()!r}"
                f" (caller first), optionally ending with '> $'; fix the pattern"
            )
    return StackPattern(text, tuple(_regex(p, where, whole=text) for p in parts), innermost)


def _patterns(raw: Mapping[str, object], key: str, where: str) -> tuple[StackPattern, ...]:
    return tuple(
        parse_pattern(t, f"{where}: {key}[{i}]") for i, t in enumerate(_strings(raw, key, where))
    )


def _regex(text: str, label: str, whole: str | None = None) -> re.Pattern[str]:
    """Compile ``text``; ``label`` (file: key[i]) and ``whole`` (the full pattern) name it."""
    try:
        return re.compile(text)
    except re.error as err:
        shown = whole if whole is not None else text
        raise ConfigError(
            f"{label} = {shown!r}: bad regex {text!r} ({err.msg} at position {err.pos}); "
            "fix it or escape the special characters"
        ) from None


def _string(raw: Mapping[str, object], key: str, where: str, required: bool = False) -> str:
    value = raw.get(key)
    if value is None:
        if required:
            raise ConfigError(f'{where}: missing key {key!r}; add {key} = "..."')
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {key} = {value!r}: expected a string")
    return value


def _strings(raw: Mapping[str, object], key: str, where: str) -> list[str]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} = {value!r}: expected a list of strings")
    return [str(v) for v in value]
