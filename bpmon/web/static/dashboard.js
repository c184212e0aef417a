// bpmon's dashboard: draws the server's figures with plotly.js and keeps a Job page live.
// Pages are rendered on the server; this script only draws, switches views and, on a Job page,
// listens to the job's event stream and redraws from /job/<job>/live.json on each new report.
"use strict";

(function () {
  const body = document.body;
  const page = body.dataset.page;
  const plots = new Map(); // element id -> figure as drawn (before theming)
  const forms = new Map(); // element id -> {wide, narrow}: the figure's forms to choose from

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // The page's colours on every figure: transparent background, the theme's text and grid.
  function themed(layout) {
    const fg = css("--fg"), grid = css("--grid");
    const out = Object.assign({}, layout, {
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
      font: Object.assign({ color: fg, family: "system-ui, sans-serif" }, layout.font || {}),
      hoverlabel: { font: { color: "#111" }, bgcolor: "#fff" },
    });
    Object.keys(out).filter((k) => /^[xy]axis\d*$/.test(k)).forEach((k) => {
      out[k] = Object.assign({ gridcolor: grid, linecolor: grid, zerolinecolor: grid }, out[k]);
    });
    if (out.legend) out.legend = Object.assign({ font: { color: fg } }, out.legend);
    return out;
  }

  function figureOf(id) {
    const el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  // A figure with a narrow form (the job graph drawn top to bottom) shows the wide one when it
  // fits its box without scrolling, else the narrow one when that fits, else the narrower.
  function fitting(el, wide, narrow) {
    if (!narrow) return wide;
    const room = el.parentElement ? el.parentElement.clientWidth : window.innerWidth;
    const w = (wide.layout.meta || {}).min_width || 0;
    const n = (narrow.layout.meta || {}).min_width || 0;
    if (w <= room) return wide;
    if (n <= room) return narrow;
    return n < w ? narrow : wide;
  }

  async function draw(el, wide, narrow) {
    forms.set(el.id, { wide: wide, narrow: narrow || null });
    const figure = fitting(el, wide, narrow);
    const before = plots.get(el.id);
    const turned = before && (before.layout.meta || {}).direction !== (figure.layout.meta || {}).direction;
    plots.set(el.id, figure);
    const started = performance.now();
    const config = { responsive: true, displaylogo: false, displayModeBar: false };
    const meta = figure.layout.meta || {};
    el.style.minWidth = meta.min_width ? meta.min_width + "px" : "";
    el.style.height = (figure.layout.height || 360) + "px";
    await Plotly.react(el, figure.data, themed(figure.layout), config);
    if (turned) await Plotly.Plots.resize(el); // its width was that of the other direction
    el.dataset.renderMs = (performance.now() - started).toFixed(1);
    if (meta.direction) el.dataset.direction = meta.direction;
    focus(el, meta);
    body.dataset.drawn = String(Number(body.dataset.drawn || 0) + 1);
  }

  // A graph wider than its card scrolls sideways: bring the root cause into view.
  function focus(el, meta) {
    const box = el.parentElement;
    if (meta.focus === null || meta.focus === undefined || !box) return;
    if (box.scrollWidth <= box.clientWidth) return;
    box.scrollLeft = Math.max(0, meta.focus * box.scrollWidth - box.clientWidth / 2);
  }

  async function drawAll() {
    if (typeof Plotly === "undefined") return;
    const slots = Array.from(document.querySelectorAll(".figure[data-figure]"));
    for (const el of slots) {
      await draw(el, figureOf(el.dataset.figure), el.dataset.narrow ? figureOf(el.dataset.narrow) : null);
    }
  }

  // On a window that changed width, a figure with two forms takes the one that fits now.
  let resizing = null;
  function refit() {
    clearTimeout(resizing);
    resizing = setTimeout(() => {
      forms.forEach((form, id) => {
        const el = document.getElementById(id);
        if (!el || !form.narrow) return;
        const now = fitting(el, form.wide, form.narrow);
        if (now !== plots.get(id)) draw(el, form.wide, form.narrow);
      });
    }, 150);
  }

  // The theme changed: only the colours are set again (the series keep their current axis).
  function retheme() {
    plots.forEach((figure, id) => {
      const el = document.getElementById(id);
      if (!el) return;
      const look = themed(figure.layout);
      const update = { font: look.font, paper_bgcolor: look.paper_bgcolor, plot_bgcolor: look.plot_bgcolor };
      Object.keys(look).filter((k) => /^[xy]axis\d*$/.test(k)).forEach((k) => {
        ["gridcolor", "linecolor", "zerolinecolor"].forEach((c) => { update[k + "." + c] = look[k][c]; });
      });
      Plotly.relayout(el, update);
    });
  }

  // ------------------------------------------------------------------------------- jobs page
  function jobsPage() {
    const form = document.getElementById("start-example");
    const said = document.getElementById("start-result");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button");
      button.disabled = true;
      said.className = "";
      said.textContent = "starting…";
      const scenario = form.elements.scenario.value;
      try {
        const answer = await fetch("/api/v1/jobs", {
          method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ scenario: scenario }),
        });
        const doc = await answer.json();
        if (answer.status === 201) {
          said.textContent = "started " + doc.job;
          location.assign("/job/" + encodeURIComponent(doc.job));
          return;
        }
        said.className = "bad";
        said.textContent = doc.detail || "could not start " + scenario;
      } catch (error) {
        said.className = "bad";
        said.textContent = "the server did not answer: " + error;
      }
      button.disabled = false;
    });
    if (body.dataset.running === "yes") setInterval(refreshJobs, 5000);
  }

  async function refreshJobs() {
    const answer = await fetch(location.pathname, { headers: { Accept: "text/html" } });
    if (!answer.ok) return;
    const doc = new DOMParser().parseFromString(await answer.text(), "text/html");
    const fresh = doc.getElementById("jobs");
    if (fresh) document.getElementById("jobs").innerHTML = fresh.innerHTML;
  }

  // -------------------------------------------------------------------------------- job page
  // The checkpoint panel of a new report: its text parts replaced and its figures redrawn in
  // place; made anew when it comes, goes or changes its figures.
  async function showCheckpoints(html, drawn) {
    const box = document.getElementById("checkpoints");
    if (!box) return;
    const fresh = document.createElement("template");
    fresh.innerHTML = html || "";
    const slots = (root) =>
      Array.from(root.querySelectorAll(".figure[data-figure]"), (el) => el.id).join(" ");
    if (slots(fresh.content) !== slots(box)) {
      box.querySelectorAll(".figure[data-figure]").forEach((el) => {
        plots.delete(el.id);
        forms.delete(el.id);
        if (el.data) Plotly.purge(el);
      });
      box.replaceChildren(fresh.content);
    } else {
      box.querySelectorAll("[data-part]").forEach((el) => {
        const now = fresh.content.querySelector("[data-part='" + el.dataset.part + "']");
        if (now) el.replaceWith(now);
      });
      const card = box.firstElementChild, made = fresh.content.firstElementChild;
      if (card && made) card.className = made.className;
    }
    for (const el of box.querySelectorAll(".figure[data-figure]")) {
      if (drawn && drawn[el.id]) await draw(el, drawn[el.id]);
    }
  }

  function jobPage() {
    const job = body.dataset.job;
    const select = document.getElementById("series-vertex");
    let series = figureOf("series-data");
    let updating = false, again = false, updates = 0;

    function showSeries(vertex) {
      const el = document.getElementById("series");
      const values = series.vertices[vertex];
      if (!values || !el.data) return;
      const keys = plots.get("series").layout.meta.keys;
      const ys = keys.map((k) => values[k]);
      const xs = keys.map(() => series.x);
      Plotly.relayout(el, series.axis);
      const colours = values.level.map((lv) => series.colours[lv === null ? "None" : lv]);
      Plotly.restyle(el, { x: xs, y: ys, customdata: keys.map(() => series.labels) });
      Plotly.restyle(el, { "marker.color": [colours], text: [values.level.map((lv) => lv || "no level")] }, [0]);
      el.dataset.vertex = vertex;
    }

    function choose(vertex) {
      if (!vertex || !series.vertices[vertex]) return;
      select.value = vertex;
      showSeries(vertex);
    }

    select.addEventListener("change", () => showSeries(select.value));
    const graph = document.getElementById("graph");
    graph.on && graph.on("plotly_click", (event) => choose(event.points[0].customdata));
    graph.on && graph.on("plotly_clickannotation", (event) => {
      const name = event.annotation.name || "";
      if (name.startsWith("vertex:")) choose(name.slice(7));
    });
    let heatChosen = false; // until the user picks, the heat map shows what shows the cause
    document.querySelectorAll("input[name=heat]").forEach((radio) => {
      radio.addEventListener("change", () => {
        heatChosen = true;
        const shown = Number(radio.value);
        Plotly.restyle("heatmap", { visible: [shown === 0, shown === 1] });
      });
    });

    async function refresh() {
      if (updating) { again = true; return; }
      updating = true;
      try {
        const answer = await fetch("/job/" + encodeURIComponent(job) + "/live.json");
        if (!answer.ok) return;
        const live = await answer.json();
        document.getElementById("job-head").innerHTML = live.head;
        document.getElementById("cause-panel").innerHTML = live.cause;
        document.getElementById("latest-table").innerHTML = live.table;
        await showCheckpoints(live.checkpoints, live.checkpoint_figures);
        body.dataset.latest = live.latest || "";  // with the head that shows it, in one step
        await draw(document.getElementById("graph"), live.graph, live.graph_down);
        const heat = live.heatmap;
        const shown = heatChosen || !heat.layout.meta ? null : String(heat.layout.meta.shown);
        if (shown !== null) {
          const pick = document.querySelector("input[name=heat][value='" + shown + "']");
          if (pick) pick.checked = true;
        }
        const radio = document.querySelector("input[name=heat]:checked");
        if (radio && heat.data.length === 2) {
          heat.data[0].visible = radio.value === "0";
          heat.data[1].visible = radio.value === "1";
        }
        await draw(document.getElementById("heatmap"), heat);
        series = live.series;
        document.getElementById("series-legend").innerHTML = live.series_legend;
        const drawnKeys = plots.get("series").layout.meta.keys.join(",");
        if (live.series_figure.layout.meta.keys.join(",") !== drawnKeys) {
          await draw(document.getElementById("series"), live.series_figure);
        }
        const keep = select.value;
        select.innerHTML = live.options;
        choose(series.vertices[keep] ? keep : live.vertex);
        body.dataset.state = live.state;
        body.dataset.updates = String(++updates);
        document.getElementById("job-head").classList.add("flash");
        setTimeout(() => document.getElementById("job-head").classList.remove("flash"), 1300);
      } finally {
        updating = false;
        if (again) { again = false; refresh(); }
      }
    }

    const latest = document.getElementById("latest");
    body.dataset.latest = latest ? latest.dataset.latest : "";
    if (series && select.value) showSeries(select.value);
    if (body.dataset.state === "running" && window.EventSource) {
      const stream = new EventSource("/api/v1/jobs/" + encodeURIComponent(job) + "/events");
      stream.addEventListener("report", refresh);
      stream.addEventListener("state", (event) => {
        const state = JSON.parse(event.data).state;
        if (state !== "running") { stream.close(); refresh(); }
      });
      stream.addEventListener("open", () => { body.dataset.stream = "open"; });
    }
    const stop = document.getElementById("stop-job");
    if (stop) {
      stop.addEventListener("click", async () => {
        stop.disabled = true;
        stop.textContent = "Stopping…";
        const answer = await fetch("/api/v1/jobs/" + encodeURIComponent(job), { method: "DELETE" });
        stop.textContent = answer.ok ? "Stopped" : "Could not stop";
        await refresh();
      });
    }
  }

  // ---------------------------------------------------------------------------- compare page
  function comparePage() {
    const job = document.getElementById("compare-job");
    if (!job) return;
    job.addEventListener("change", () => {
      job.form.elements.before.disabled = true;
      job.form.elements.after.disabled = true;
      job.form.submit();
    });
  }

  async function start() {
    try {
      await drawAll();
      if (page === "jobs") jobsPage();
      if (page === "job") jobPage();
      if (page === "compare") comparePage();
    } finally {
      body.dataset.ready = "yes";
    }
    window.addEventListener("resize", refit);
    const dark = window.matchMedia("(prefers-color-scheme: dark)");
    if (dark.addEventListener) dark.addEventListener("change", retheme);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
