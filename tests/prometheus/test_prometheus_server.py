"""A real Prometheus scrapes bpmon's /metrics, loads the shipped rules, and answers the dashboard.

Debian's ``prometheus`` runs on a free loopback port with a scrape interval of one second, its
TSDB in a temporary folder, the shipped ``rules/prometheus-alerts.yml`` loaded, and one scrape
job ``bpmon`` (``honor_labels: true``, as the README's snippet) pointing at the collector's
registry served by ``prometheus_client.make_wsgi_app`` on a stdlib WSGI server (Prometheus
negotiates OpenMetrics there). The registry holds the reports of three real runs: a bottlenecked
scenario, the shipped ``checkpoint-timeouts`` example, whose checkpoints wait behind its
backpressure, and the shipped ``hot-key`` example, whose hot key the autoscaler would scale up
without effect. A last test points a second Prometheus at a real ``bpmon serve --run`` process
watching the bottlenecked scenario, a burst a second. The tests wait for scrapes and rule
evaluations through Prometheus's HTTP API; nothing of Prometheus is mocked.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
import pytest
from prometheus_client import make_wsgi_app

from bpmon.model.counters import ServiceCounters
from bpmon.model.datafiles import data_file
from bpmon.model.values import Report
from bpmon.prometheus import make_registry
from tests.prometheus.bottleneck import BOTTLENECK
from tests.prometheus.conftest import CHECKPOINTS_HELD_BY, SCALED_INEFFECTIVELY
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "dashboards" / "bpmon-overview.json"
ALERT_RULES = REPO / "rules" / "prometheus-alerts.yml"
WAIT_S = 60.0
"""The longest any wait here lasts before the test fails (Prometheus scrapes every second)."""

CONFIG = """
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: bpmon
    honor_labels: true
    static_configs:
      - targets: ["{target}"]
"""


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output free of one access-log line per scrape."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _until(what: str, check: Callable[[], Any]) -> Any:
    """Poll ``check`` (an HTTP query: every 0.1 s) until it answers something; fail naming
    ``what`` after WAIT_S."""
    return wait_until(check, what, WAIT_S, poll_s=0.1)


@dataclass(frozen=True)
class Prometheus:
    """A running Prometheus: its HTTP API and its log."""

    url: str
    log: Path

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/PATH`` and its ``data``; fails on any error Prometheus reports."""
        reply = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        body = reply.json()
        assert reply.status_code == 200 and body["status"] == "success", (path, params, body)
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector ``promql`` gives now."""
        data = self.api("query", query=promql)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result


@pytest.fixture(scope="module")
def metrics_target(
    bottleneck_report: Report, checkpoint_report: Report, hot_key_report: Report
) -> Iterator[str]:
    """``host:port`` of a WSGI server answering /metrics from the collector's registry."""
    counters = ServiceCounters(bursts=3, diagnoses=3)
    reports = [bottleneck_report, checkpoint_report, hot_key_report]
    registry = make_registry(lambda: reports, lambda: counters)
    server: WSGIServer = make_server(
        "127.0.0.1", 0, make_wsgi_app(registry), handler_class=_QuietHandler
    )
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@contextmanager
def _running_prometheus(binary: Path, target: str, home: Path) -> Iterator[Prometheus]:
    """Prometheus scraping ``target`` every second, ready and with one scrape of it done."""
    config = home / "prometheus.yml"
    config.write_text(CONFIG.format(rules=ALERT_RULES, target=target), "utf-8")
    port = _free_port()
    log = home / "prometheus.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={home / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Prometheus(f"http://127.0.0.1:{port}", log)
    try:
        _until("Prometheus to be ready", lambda: _ready(server, process))
        _until(f"a scrape of {target}", lambda: server.query('up{job="bpmon"} == 1'))
        yield server
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def prometheus(
    prometheus_bin: Path, metrics_target: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    """Prometheus scraping the WSGI server of :func:`metrics_target`."""
    with _running_prometheus(prometheus_bin, metrics_target, tmp_path_factory.mktemp("p")) as p:
        yield p


def _ready(server: Prometheus, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        pytest.fail(f"prometheus exited ({process.returncode}):\n{server.log.read_text()[-2000:]}")
    try:
        return httpx.get(f"{server.url}/-/ready", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.slow
def test_prometheus_scrapes_bpmon_series_with_their_own_job_label(prometheus: Prometheus) -> None:
    level = prometheus.query('bpmon_backpressure_severity{job="slowjob", vertex="src"}')
    assert [float(s["value"][1]) for s in level] == [2.0]
    cause = prometheus.query('bpmon_root_cause_info{job="slowjob"}')
    assert [(s["metric"]["vertex"], s["metric"]["kind"]) for s in cause] == [
        ("work", "slow-operator")
    ]
    # bpmon's own counters carry no job label: they get the scrape job's.
    assert prometheus.query('bpmon_bursts_total{job="bpmon"} == 3')
    names = {s["metric"]["__name__"] for s in prometheus.query('{__name__=~"bpmon_.+"}')}
    assert {"bpmon_subtask_out_pool_usage_ratio", "bpmon_backpressure_level",
            "bpmon_window_jitter_p99_seconds", "bpmon_report_age_seconds"} <= names  # fmt: skip


@pytest.mark.slow
def test_the_shipped_rules_evaluate_and_high_backpressure_is_pending(
    prometheus: Prometheus,
) -> None:
    def evaluated() -> list[dict[str, Any]]:
        rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
        done = all(r["health"] == "ok" and r["lastEvaluation"] > "2000" for r in rules)
        return rules if done and len(rules) == 18 else []

    rules = _until("every rule to be evaluated once without error", evaluated)
    assert {r["type"] for r in rules} == {"alerting", "recording"}

    def high() -> list[dict[str, Any]]:
        alerts = prometheus.api("alerts")["alerts"]
        return [
            a
            for a in alerts
            if a["labels"]["alertname"] == "BpmonBackpressureHigh"
            and a["labels"]["job"] == "slowjob"
        ]

    (alert,) = _until("BpmonBackpressureHigh to be pending", high)
    assert alert["state"] == "pending"  # `for: 5m` has not passed
    assert (alert["labels"]["job"], alert["labels"]["vertex"]) == ("slowjob", "work")
    assert "HIGH now: src." in alert["annotations"]["description"]
    recorded = 'bpmon:vertex_records_out_per_second:sum{job="slowjob", vertex="src"}'
    (summed,) = _until(f"the recording rule {recorded}", lambda: prometheus.query(recorded))
    assert float(summed["value"][1]) > 0


@pytest.mark.slow
def test_prometheus_scrapes_the_checkpoints_and_the_held_checkpoints_alert_is_pending(
    prometheus: Prometheus, checkpoint_report: Report
) -> None:
    checkpoints = checkpoint_report.checkpoints
    assert checkpoints is not None and checkpoints.last is not None
    job = checkpoint_report.job

    def value(promql: str) -> float:
        (sample,) = prometheus.query(promql)
        return float(sample["value"][1])

    # Read through OpenMetrics: the counter family bpmon_checkpoint_failed, its sample _total.
    assert value(f'bpmon_checkpoint_failed_total{{job="{job}"}}') == checkpoints.failed
    duration = value(f'bpmon_checkpoint_duration_seconds{{job="{job}"}}')
    assert duration == checkpoints.last.duration_ms / 1000
    delays = {
        s["metric"]["vertex"]: float(s["value"][1])
        for s in prometheus.query(f'bpmon_checkpoint_start_delay_seconds{{job="{job}"}}')
    }
    assert delays == {
        row.name: row.start_delay_ms / 1000
        for row in checkpoints.vertices
        if row.start_delay_ms is not None
    }
    held = prometheus.query(f'bpmon_checkpoint_held_by_backpressure{{job="{job}"}} == 1')
    assert [s["metric"]["vertex"] for s in held] == [CHECKPOINTS_HELD_BY]
    # slowjob takes no checkpoints: no checkpoint series of it.
    assert not prometheus.query('{__name__=~"bpmon_checkpoint_.+", job="slowjob"}')

    def pending() -> list[dict[str, Any]]:
        alerts = prometheus.api("alerts")["alerts"]
        return [
            a for a in alerts if a["labels"]["alertname"] == "BpmonCheckpointsHeldByBackpressure"
        ]

    (alert,) = _until("BpmonCheckpointsHeldByBackpressure to be pending", pending)
    assert alert["state"] == "pending"  # `for: 5m` has not passed
    assert (alert["labels"]["job"], alert["labels"]["vertex"]) == (job, CHECKPOINTS_HELD_BY)
    description = alert["annotations"]["description"]
    assert f"{checkpoints.failed} checkpoints have failed since the job started" in description
    assert f"backpressure from {CHECKPOINTS_HELD_BY} holds up" in description


@pytest.mark.slow
def test_prometheus_scrapes_the_autoscalers_opinion_and_the_ineffective_alert_is_pending(
    prometheus: Prometheus,
    bottleneck_report: Report,
    checkpoint_report: Report,
    hot_key_report: Report,
) -> None:
    for report in (bottleneck_report, checkpoint_report, hot_key_report):
        autoscaler, job = report.autoscaler, report.job
        assert autoscaler is not None, report.job  # a runtime report with rates has an opinion
        recommended = {
            s["metric"]["vertex"]: float(s["value"][1])
            for s in prometheus.query(f'bpmon_autoscaler_recommended_parallelism{{job="{job}"}}')
        }
        assert recommended == {r.name: r.recommended_parallelism for r in autoscaler.vertices}
        verdicts = prometheus.query(f'bpmon_autoscaler_disagreement{{job="{job}"}}')
        assert len(verdicts) == 5 * len(autoscaler.vertices), job  # a 0 where none holds
        held = {(s["metric"]["vertex"], s["metric"]["verdict"])
                for s in verdicts if s["value"][1] == "1"}  # fmt: skip
        assert held == {(v.vertex, v.verdict) for v in autoscaler.verdicts
                        if v.verdict != "agrees"}, (job, autoscaler.verdicts)  # fmt: skip
    ineffective = prometheus.query(
        'bpmon_autoscaler_disagreement{verdict="scales-ineffectively"} == 1'
    )
    assert [(s["metric"]["job"], s["metric"]["vertex"]) for s in ineffective] == [
        (hot_key_report.job, SCALED_INEFFECTIVELY)
    ]

    def pending() -> list[dict[str, Any]]:
        alerts = prometheus.api("alerts")["alerts"]
        return [
            a for a in alerts if a["labels"]["alertname"] == "BpmonAutoscalerScalesIneffectively"
        ]

    (alert,) = _until("BpmonAutoscalerScalesIneffectively to be pending", pending)
    assert alert["state"] == "pending"  # `for: 10m` has not passed
    job = hot_key_report.job
    assert (alert["labels"]["job"], alert["labels"]["vertex"]) == (job, SCALED_INEFFECTIVELY)
    (row,) = [r for r in hot_key_report.vertices if r.name == SCALED_INEFFECTIVELY]
    assert hot_key_report.autoscaler is not None
    (advice,) = [r for r in hot_key_report.autoscaler.vertices if r.name == SCALED_INEFFECTIVELY]
    description = alert["annotations"]["description"]
    assert (
        f"would scale {SCALED_INEFFECTIVELY} of {job} from {row.parallelism} to "
        f"{advice.recommended_parallelism} subtasks, which cannot fix its root cause (data-skew)"
    ) in description, description


def _targets(panel: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from panel.get("targets", [])
    for inner in panel.get("panels", []):
        yield from _targets(inner)


def _substitute(expr: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        expr = expr.replace(f"${{{name}}}", value).replace(f"${name}", value)
    assert "$" not in expr, f"an unknown variable is left in {expr}"
    return expr


@pytest.mark.slow
def test_every_dashboard_query_is_valid_promql_and_returns_data(
    prometheus: Prometheus,
    bottleneck_report: Report,
    checkpoint_report: Report,
    hot_key_report: Report,
) -> None:
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    # Grafana's multi-value form; the checkpoint panel has data only from checkpoint-timeouts,
    # the autoscaler's disagreements surely only from hot-key.
    reports = (bottleneck_report, checkpoint_report, hot_key_report)
    jobs = "|".join(r.job for r in reports)
    vertices = "|".join(sorted({v.name for r in reports for v in r.vertices}))
    variables = {"job": jobs, "vertex": vertices, "__rate_interval": "10s"}
    queries = [
        (panel["title"], _substitute(target["expr"], variables))
        for panel in dashboard["panels"]
        for target in _targets(panel)
    ]
    assert len(queries) >= len(dashboard["panels"]) >= 10
    for title, promql in queries:
        # Rates need two scrapes inside their window: wait for data, fail on an invalid query.
        result = _until(f"data for {title!r}: {promql}", partial(prometheus.query, promql))
        assert all(s["value"][1] not in ("NaN", "+Inf", "-Inf") for s in result), (title, result)
        end = time.time()
        ranged = prometheus.api("query_range", query=promql, start=str(end - 30),
                                end=str(end), step="1")  # fmt: skip
        assert ranged["result"], f"no range data for {title!r}: {promql}"


@pytest.mark.slow
def test_the_dashboard_variables_list_the_job_and_its_vertices(
    prometheus: Prometheus,
    bottleneck_report: Report,
    checkpoint_report: Report,
    hot_key_report: Report,
) -> None:
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    found = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert found["datasource"]["query"] == "prometheus"
    # Grafana's label_values(SELECTOR, LABEL) is Prometheus's series API over SELECTOR.
    listed = {}
    for name in ("job", "vertex"):
        query = found[name]["query"]["query"]
        selector, label = query.removeprefix("label_values(").removesuffix(")").rsplit(", ", 1)
        assert label == name
        series = prometheus.api("series", **{"match[]": _substitute(selector, {"job": "slowjob"})})
        listed[name] = {s[label] for s in series}
    assert listed == {
        "job": {"slowjob", checkpoint_report.job, hot_key_report.job},
        "vertex": {v.name for v in bottleneck_report.vertices},
    }


def test_every_panel_reads_the_chosen_datasource_and_the_dashboard_ships() -> None:
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    assert dashboard["uid"] == "bpmon-overview"
    for panel in dashboard["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert list(_targets(panel)), f"panel {panel['title']!r} has no query"
    kinds = {panel["type"] for panel in dashboard["panels"]}
    assert {"state-timeline", "table", "heatmap", "timeseries"} <= kinds
    shipped = data_file("dashboards", "bpmon-overview", suffix=".json")
    assert shipped.read_bytes() == DASHBOARD.read_bytes()


@pytest.mark.slow
def test_prometheus_scrapes_a_real_bpmon_serve_watching_a_scenario(
    bpmon_bin: Path, prometheus_bin: Path, tmp_path: Path
) -> None:
    scenario = tmp_path / "served.toml"
    scenario.write_text(BOTTLENECK.replace('name = "slowjob"', 'name = "served"'), "utf-8")
    serve = subprocess.Popen(
        [bpmon_bin, "serve", "--port", "0", "--run", str(scenario), "--every", "1",
         "--runs-dir", str(tmp_path / "runs")],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    assert serve.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(serve.stderr, lines), daemon=True)
    reader.start()
    try:
        url = _announced_url(lines)
        with _running_prometheus(prometheus_bin, url.removeprefix("http://"), tmp_path) as prom:
            # Bursts every second: the counter grows from scrape to scrape, the level follows.
            _until("two bursts", lambda: prom.query('bpmon_bursts_total{job="bpmon"} >= 2'))
            high = 'bpmon_backpressure_severity{job="served", vertex="src"} == 2'
            _until("the served job's source to be HIGH", lambda: prom.query(high))
            cause = 'bpmon_root_cause_info{job="served", vertex="work", kind="slow-operator"}'
            _until("the served job's root cause", lambda: prom.query(cause))
            info = prom.query('bpmon_report_info{job="served"}')
            assert [s["metric"]["source"] for s in info] == ["runtime"]
            assert prom.query('bpmon_subtask_busy_time_ratio{job="served", vertex="work"}')
    finally:
        serve.terminate()
        code = serve.wait(timeout=60)
        reader.join(timeout=10)
        serve.stderr.close()
    said = "".join(lines.queue)
    assert code == 0, f"bpmon serve did not stop cleanly on SIGTERM ({code}): {said}"


def _lines(stream: IO[bytes], into: queue.Queue[str]) -> None:
    """Put every line of ``stream`` into ``into`` until it ends."""
    for raw in stream:
        into.put(raw.decode(errors="replace"))


def _announced_url(lines: queue.Queue[str]) -> str:
    """The URL ``bpmon serve`` says it serves (its first line on stderr)."""
    try:
        first = lines.get(timeout=WAIT_S)
    except queue.Empty:
        pytest.fail(f"bpmon serve said nothing in {WAIT_S:.0f} s")
    match = re.search(r"serving (http://\S+) ", first)
    assert match, f"bpmon serve did not announce its URL: {first}"
    return match.group(1)
