"""A small client of Flink's REST API (the JobManager's ``rest.port``, 8081 by default).

Only ``GET`` of JSON documents is needed to watch a job. The client counts what it costs (requests
sent, bytes received, time spent waiting), so a burst can say what watching cost and the
benchmark can report it.

A watch runs for weeks, and a JobManager has hiccups: a leader election, a request that times out
under load, an HTTP 503 while it restarts. So a request that fails in a way that may pass (a
timeout, a connection refused or reset, an HTTP 5xx) is tried again after
:data:`RETRY_DELAYS_S` (0.2 s, 0.5 s, 1 s: four attempts), and no new attempt starts once
:data:`RETRY_BUDGET_S` have passed since the first; then it is one
:class:`~bpmon.model.errors.UnavailableError` line saying what happened how often (the watch waits
and tries again later). A 4xx is an answer, not a hiccup: never retried (404 is
:class:`NotFoundError`).

The first contact is different: ``get(..., retry=False)`` makes one attempt, and every way the
address can fail is one plain :class:`~bpmon.model.errors.CollectorError` line naming the fix:
nothing listens there, the host does not resolve, it answers but is not Flink, it does not answer in
time. A user who typed a wrong address learns it at once, not after seconds of retries.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bpmon.model.errors import CollectorError, ConfigError, TargetNotFoundError, UnavailableError

DEFAULT_TIMEOUT_S = 10.0
"""How long one request may take: a thread dump of a busy task manager takes a few hundred ms."""

RETRY_DELAYS_S = (0.2, 0.5, 1.0)
"""The pauses before the second, third and fourth attempt of a request that failed transiently."""

RETRY_BUDGET_S = 15.0
"""No new attempt starts once this long has passed since the first began (a hung JobManager costs
at most two timeouts, not four)."""

FIX_UNAVAILABLE = "check the JobManager's log; bpmon tries again"
"""What an :class:`~bpmon.model.errors.UnavailableError` of the client tells the user to do."""


@dataclass(frozen=True, slots=True)
class Cost:
    """What the requests made so far cost: how many were sent (failed attempts too), bytes
    received, seconds waited for answers."""

    requests: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def __sub__(self, other: Cost) -> Cost:
        """The cost between two readings."""
        return Cost(
            self.requests - other.requests, self.bytes - other.bytes, self.seconds - other.seconds
        )


class NotFoundError(TargetNotFoundError):
    """Flink answered 404: the job, vertex or task manager asked for does not exist (any more).
    ``flink_says``: the first line of Flink's own error text, or nothing."""

    def __init__(self, message: str, flink_says: str = "") -> None:
        super().__init__(message)
        self.flink_says = flink_says


class _TransientError(Exception):
    """One attempt failed in a way that may pass; ``what`` says how (``answered HTTP 503``)."""

    def __init__(self, what: str, first_contact: CollectorError) -> None:
        super().__init__(what)
        self.what = what
        self.first_contact = first_contact


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
        sleep: waits between attempts (tests pass a recording one).
    """

    def __init__(
        self,
        url: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = normalise_url(url)
        self.timeout_s = timeout_s
        self._sleep = sleep
        self._lock = threading.Lock()
        self._cost = Cost()

    @property
    def cost(self) -> Cost:
        """Everything requested so far."""
        with self._lock:
            return self._cost

    def get(self, path: str, query: dict[str, str] | None = None, *, retry: bool = True) -> Any:
        """The JSON document at ``path`` (``/jobs/overview``), with ``query`` parameters.

        Args:
            retry: try a transient failure again (see the module); False for the first contact.

        Raises:
            NotFoundError: Flink answered 404.
            UnavailableError: a timeout, connection failure or HTTP 5xx, on every attempt.
            CollectorError: not Flink, another HTTP error, not JSON; with ``retry=False``, also
                what would have been retried.
        """
        target = self.url + path
        if query:
            target += "?" + urllib.parse.urlencode(query, safe=",")
        began = time.monotonic()
        failures: list[str] = []
        for delay in (0.0, *RETRY_DELAYS_S):
            if failures:
                if time.monotonic() - began + delay > RETRY_BUDGET_S:
                    break
                self._sleep(delay)
            try:
                body = self._fetch(target, path)
            except _TransientError as err:
                if not retry:
                    raise err.first_contact from None
                failures.append(err.what)
                continue
            return self._json(body, path)
        raise UnavailableError(_gave_up(self.url, failures, time.monotonic() - began))

    def put_json(self, path: str, document: Any) -> None:
        """``PUT`` ``document`` as JSON to ``path``, once (a change is never sent twice).

        Raises:
            CollectorError: Flink refused it (with its errors) or could not be reached.
        """
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(document).encode(),
            method="PUT",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
        except urllib.error.HTTPError as err:
            raise CollectorError(
                f"Flink at {self.url} refused PUT {path} (HTTP {err.code}){_flink_errors(err)}"
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
            raise CollectorError(
                f"cannot reach Flink at {self.url} for PUT {path} "
                f"({_reason(getattr(err, 'reason', err))}); check that the JobManager is up"
            ) from None
        finally:
            with self._lock:
                self._cost = Cost(self._cost.requests + 1, self._cost.bytes, self._cost.seconds)

    def _json(self, body: bytes, path: str) -> Any:
        try:
            return json.loads(body)
        except ValueError:
            raise CollectorError(
                f"{self.url} answered GET {path} with something that is not JSON; "
                "point --flink at the Flink JobManager's REST address (rest.port, default 8081)"
            ) from None

    def _fetch(self, target: str, path: str) -> bytes:
        """One attempt; its cost is counted whatever its outcome."""
        request = urllib.request.Request(target, headers={"Accept": "application/json"})
        began, body = time.perf_counter(), b""
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = bytes(response.read())
                return body
        except urllib.error.HTTPError as err:
            raise self._http_error(err, path) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
            raise self._unreachable(getattr(err, "reason", err), path) from None
        finally:
            with self._lock:
                self._cost = Cost(
                    self._cost.requests + 1,
                    self._cost.bytes + len(body),
                    self._cost.seconds + time.perf_counter() - began,
                )

    def _unreachable(self, reason: object, path: str) -> _TransientError:
        """A timeout or a connection that failed: transient, with its first-contact line."""
        if isinstance(reason, TimeoutError):
            return _TransientError(
                f"did not answer GET {path} within {self.timeout_s:g} s",
                CollectorError(
                    f"Flink at {self.url} did not answer GET {path} within {self.timeout_s:g} s; "
                    "check that the JobManager is not overloaded, or that this is its REST address"
                ),
            )
        text = _reason(reason)
        return _TransientError(
            f"could not be reached for GET {path} ({text})",
            CollectorError(
                f"cannot reach Flink at {self.url} ({text}); check the address and "
                "that the JobManager's REST endpoint is up (rest.port, default 8081)"
            ),
        )

    def _http_error(self, err: urllib.error.HTTPError, path: str) -> Exception:
        detail = _flink_errors(err)
        if err.code == 404:
            return NotFoundError(
                f"Flink at {self.url}: GET {path} is not found{detail}", detail[2:-1]
            )
        failed = CollectorError(
            f"Flink at {self.url} answered GET {path} with HTTP {err.code}{detail}; "
            "check the JobManager's log"
        )
        if err.code >= 500:
            return _TransientError(f"answered HTTP {err.code}{detail} to GET {path}", failed)
        return failed


def _gave_up(url: str, failures: list[str], spent_s: float) -> str:
    """One line: what the attempts met, how many times, over how long."""
    distinct = list(dict.fromkeys(failures))
    what = distinct[0] if len(distinct) == 1 else ", then ".join(distinct)
    times = "once" if len(failures) == 1 else f"{len(failures)} times"
    return f"Flink at {url} {what}, {times} in {spent_s:.1f} s; {FIX_UNAVAILABLE}"


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
    if isinstance(reason, ConnectionResetError):
        return "connection reset"
    if isinstance(reason, socket.gaierror):
        return "the host name does not resolve"
    text = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
    return str(text).lower()
