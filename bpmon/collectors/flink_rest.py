"""A small client of Flink's REST API (the JobManager's ``rest.port``, 8081 by default).

Only ``GET`` of JSON documents is needed to watch a job. The client counts what it costs (requests,
bytes received, time spent waiting), so a burst can say what watching cost and the benchmark can
report it. Every way the address can fail becomes one :class:`~bpmon.errors.CollectorError` line
naming the fix: nothing listens there, the host does not resolve, it answers but is not Flink, it
does not answer in time.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from bpmon.errors import CollectorError, ConfigError, TargetNotFoundError

DEFAULT_TIMEOUT_S = 10.0
"""How long one request may take: a thread dump of a busy task manager takes a few hundred ms."""


@dataclass(frozen=True, slots=True)
class Cost:
    """What the requests made so far cost: how many, bytes received, seconds waited for answers."""

    requests: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def __sub__(self, other: Cost) -> Cost:
        """The cost between two readings."""
        return Cost(
            self.requests - other.requests, self.bytes - other.bytes, self.seconds - other.seconds
        )


class NotFoundError(TargetNotFoundError):
    """Flink answered 404: the job, vertex or task manager asked for does not exist (any more)."""


def normalise_url(url: str) -> str:
    """``host:port`` or ``http://host:port/`` as ``http://host:port`` (no trailing slash).

    Raises:
        ConfigError: not an http(s) address.
    """
    text = url.strip()
    if "://" not in text:
        text = f"http://{text}"
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"--flink {url!r}: expected the JobManager's REST address, e.g. http://localhost:8081"
        )
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


class FlinkRest:
    """GETs JSON from one Flink REST endpoint; thread-safe (thread dumps of several task managers
    are fetched at once).

    Args:
        url: the JobManager's REST address (``http://localhost:8081``).
        timeout_s: the longest one request may take.
    """

    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = normalise_url(url)
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._cost = Cost()

    @property
    def cost(self) -> Cost:
        """Everything requested so far."""
        with self._lock:
            return self._cost

    def get(self, path: str, query: dict[str, str] | None = None) -> Any:
        """The JSON document at ``path`` (``/jobs/overview``), with ``query`` parameters.

        Raises:
            NotFoundError: Flink answered 404.
            CollectorError: unreachable, not Flink, another HTTP error, or not JSON.
        """
        target = self.url + path
        if query:
            target += "?" + urllib.parse.urlencode(query, safe=",")
        began = time.perf_counter()
        body = self._fetch(target, path)
        with self._lock:
            self._cost = Cost(
                self._cost.requests + 1,
                self._cost.bytes + len(body),
                self._cost.seconds + time.perf_counter() - began,
            )
        try:
            return json.loads(body)
        except ValueError:
            raise CollectorError(
                f"{self.url} answered GET {path} with something that is not JSON; "
                "point --flink at the Flink JobManager's REST address (rest.port, default 8081)"
            ) from None

    def _fetch(self, target: str, path: str) -> bytes:
        request = urllib.request.Request(target, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body: bytes = response.read()
                return body
        except urllib.error.HTTPError as err:
            raise self._http_error(err, path) from None
        except TimeoutError:
            raise CollectorError(
                f"Flink at {self.url} did not answer GET {path} within {self.timeout_s:g} s; "
                "check that the JobManager is not overloaded, or that this is its REST address"
            ) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise CollectorError(
                f"cannot reach Flink at {self.url} ({_reason(reason)}); check the address and "
                "that the JobManager's REST endpoint is up (rest.port, default 8081)"
            ) from None

    def _http_error(self, err: urllib.error.HTTPError, path: str) -> CollectorError:
        detail = _flink_errors(err)
        if err.code == 404:
            return NotFoundError(f"Flink at {self.url}: GET {path} is not found{detail}")
        return CollectorError(
            f"Flink at {self.url} answered GET {path} with HTTP {err.code}{detail}; "
            "check the JobManager's log"
        )


def _flink_errors(err: urllib.error.HTTPError) -> str:
    """Flink's own error text (``{"errors": [...]}``), first line only, or nothing."""
    try:
        errors = json.loads(err.read()).get("errors") or []
    except (ValueError, AttributeError, OSError):
        return ""
    first = str(errors[0]).strip().splitlines()[0] if errors else ""
    return f" ({first[:200]})" if first else ""


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused: nothing listens there"
    if isinstance(reason, socket.gaierror):
        return "the host name does not resolve"
    text = getattr(reason, "strerror", None) or str(reason)
    return str(text).lower()
