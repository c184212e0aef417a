"""``bpmon analyze --format html``: the history's findings as one self-contained HTML page.

Plotly figures (each job's capacity per subtask run by run, one line per vertex, regressions
marked; the chronic bottlenecks' scores) above the same tables as the terminal's. plotly.js is
inlined once, so the file opens offline and can be linked from the dashboard or mailed as is.

The page is ``templates/analysis.html``.
"""

from __future__ import annotations

from typing import Any

from bpmon.model.analysis import Analysis
from bpmon.model.errors import BpmonError
from bpmon.render.analysis import sections, summary_lines
from bpmon.web.figures import label_text


def analysis_html(analysis: Analysis) -> str:
    """The whole page.

    Raises:
        BpmonError: plotly or jinja2 is not installed (the web extra), with the fix.
    """
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
        from markupsafe import Markup

        from bpmon.web.templating import render
    except ImportError:
        raise BpmonError(
            "--format html needs plotly and jinja2: install the web extra (scripts/setup --web, "
            "or pip install 'bpmon[web]'), or use --format md"
        ) from None
    figures = [
        _trend_figure(go, analysis, job) for job in sorted({v.job for v in analysis.vertices})
    ]
    if analysis.chronic:
        figures.append(_chronic_figure(go, analysis))
    # plotly's own HTML of each figure (a div and the script that draws it), passed through as
    # it is: the one place a page holds HTML not written by a template. Names inside the figures
    # are JSON in plotly's script; the vertex in a hover template is escaped by label_text.
    plots = [
        Markup(pio.to_html(f, include_plotlyjs="inline" if i == 0 else False, full_html=False))
        for i, f in enumerate(figures)
    ]
    return render(
        "analysis.html",
        summary=summary_lines(analysis),
        plots=plots,
        tables=list(sections(analysis)),
        regressions=analysis.regressions,
    )


def _trend_figure(go: Any, analysis: Analysis, job: str) -> Any:
    """Capacity per subtask of each vertex of ``job``, run by run; regressions marked."""
    figure = go.Figure()
    for v in (v for v in analysis.vertices if v.job == job):
        points = [p for p in v.by_run if p.capacity is not None]
        if not points:
            continue
        figure.add_trace(
            go.Scatter(
                x=[p.start for p in points],
                y=[p.capacity for p in points],
                mode="lines+markers",
                name=v.vertex,
                text=[p.run_id for p in points],
                hovertemplate="%{text}<br>%{y:,.0f} records/s per subtask<extra>"
                + label_text(v.vertex)
                + "</extra>",
            )
        )
    drops = [r for r in analysis.regressions if r.job == job and r.kind == "capacity-drop"]
    if drops:
        starts = {p.run_id: p.start for v in analysis.vertices if v.job == job for p in v.by_run}
        figure.add_trace(
            go.Scatter(
                x=[starts.get(r.after_run) for r in drops],
                y=[r.after for r in drops],
                mode="markers",
                marker={"symbol": "x", "size": 14, "color": "crimson"},
                name="capacity drop",
                text=[r.detail for r in drops],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    figure.update_layout(
        title=f"{job}: capacity per subtask (records/s at 100% busy), run by run",
        xaxis_title="run start (UTC)",
        yaxis_title="records/s per subtask",
        height=380,
        margin={"t": 50, "b": 40},
    )
    return figure


def _chronic_figure(go: Any, analysis: Analysis) -> Any:
    top = sorted(analysis.chronic, key=lambda c: c.score, reverse=True)[:20]
    figure = go.Figure(
        go.Bar(
            x=[c.score for c in top],
            y=[f"{c.job} · {c.vertex}" for c in top],
            orientation="h",
            text=[c.kind for c in top],
            hovertemplate="%{y}: score %{x:.2f} (%{text})<extra></extra>",
        )
    )
    figure.update_layout(
        title="Chronic bottlenecks: confidence x time named root cause, share of the job's time",
        xaxis_title="score",
        yaxis={"autorange": "reversed"},
        height=120 + 28 * len(top),
        margin={"t": 50, "b": 40},
    )
    return figure
