"""One self-contained HTML page for a result: ``gpuopt report`` and ``--html FILE``.

The page is built from the JSON a command prints (solve, whatif with one
change or with scenarios side by side, sweep or rentbuy; docs/json-format.md), so a saved result renders the same as a fresh
one. Charts are drawn by matplotlib into inline SVG: the page needs no
network and no script to display. Each chart is an ``<figure
class="chart" data-chart=NAME>``; the browser test counts them.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Iterable

#: the kinds of result a page can show, recognised by their keys
KINDS = ("solve", "whatif", "scenarios", "sweep", "rentbuy")

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.6rem;margin-bottom:.2rem} h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.sub{color:#666;margin-top:0} .cards{display:flex;flex-wrap:wrap;gap:.8rem;margin:1rem 0}
.card{border:1px solid #ddd;border-radius:6px;padding:.6rem .9rem;min-width:150px}
.card .v{font-size:1.3rem;font-weight:600} .card .k{color:#666;font-size:.85rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0} td,th{border:1px solid #ddd;padding:.25rem .5rem}
th{background:#f5f5f5;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#17653a} .bad{color:#a11} figure.chart{margin:.5rem 0} figure.chart svg{max-width:100%;height:auto}
ul.warn li{color:#8a5300}
"""


def kind_of(doc: dict) -> str:
    """Which command's JSON ``doc`` is (one of :data:`KINDS`); ValueError when none."""
    if "points" in doc and "dimensions" in doc:
        return "sweep"
    if "base" in doc and "scenario" in doc and "delta" in doc:
        return "whatif"
    if isinstance(doc.get("scenarios"), list) and "currency" in doc:
        return "scenarios"
    if "strategies" in doc and "cash_flows" in doc:
        return "rentbuy"
    if "format_version" in doc and "status" in doc and "inference" in doc:
        return "solve"
    raise ValueError("not the JSON of gpuopt solve, whatif (one change or scenarios side by side), sweep or rentbuy")


def _e(x) -> str:
    return html.escape(str(x))


def _money(x, cur: str = "") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:,.2f}" + (f" {cur}" if cur else "")


def _table(rows: list[dict], cols: list[str] | None = None, limit: int = 200) -> str:
    if not rows:
        return "<p>(none)</p>"
    cols = cols or list(rows[0])
    out = ["<table><tr>" + "".join(f"<th>{_e(c)}</th>" for c in cols) + "</tr>"]
    for r in rows[:limit]:
        cells = []
        for c in cols:
            v = r.get(c)
            if isinstance(v, float):
                cells.append(f'<td class="n">{v:,.2f}</td>')
            elif isinstance(v, int) and not isinstance(v, bool):
                cells.append(f'<td class="n">{v:,}</td>')
            else:
                cells.append(f"<td>{_e('' if v is None else v)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    if len(rows) > limit:
        out.append(f"<tr><td colspan={len(cols)}>... {len(rows) - limit} more rows (in the JSON)</td></tr>")
    return "".join(out) + "</table>"


def _cards(items: Iterable[tuple[str, str]]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="v">{_e(v)}</div><div class="k">{_e(k)}</div></div>' for k, v in items
    ) + "</div>"


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    # no date and fixed element ids: the same JSON gives the same page, byte for byte, today or later
    with plt.rc_context({"svg.hashsalt": "gpuopt"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _figure(name: str, fig, caption: str) -> str:
    return f'<figure class="chart" data-chart="{_e(name)}" aria-label="{_e(caption)}">{_svg(fig)}</figure>'


#: after load, the page checks that every chart's SVG has its shapes and says so on <body> (the browser test
#: reads it); a chart without them is a console error. The page needs no script to display.
_CHECK = """<script>
window.addEventListener('load', function () {
  var figs = document.querySelectorAll('figure.chart'), ok = 0;
  figs.forEach(function (f) {
    var svg = f.querySelector('svg');
    if (svg && svg.querySelectorAll('path, rect, use, text').length > 5 && svg.getBoundingClientRect().width > 0) ok++;
    else console.error('chart not drawn: ' + f.dataset.chart);
  });
  document.body.dataset.chartsDrawn = ok;
  document.body.dataset.chartsTotal = figs.length;
});
</script>"""


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9})
    return plt


def _bars(name: str, labels: list[str], values: list[float], title: str, unit: str) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(labels) + 1.0))
    ax.barh(labels[::-1], values[::-1], color="#4477aa")
    ax.set_xlabel(unit)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return _figure(name, fig, title)


def _stacked(name: str, periods: list[str], series: dict[str, list[float]], title: str, unit: str) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    bottom = [0.0] * len(periods)
    cmap = plt.get_cmap("tab20")
    for i, (label, vals) in enumerate(series.items()):
        ax.bar(range(len(periods)), vals, bottom=bottom, label=label, color=cmap(i % 20), width=0.85)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(periods)))
    ax.set_xticklabels(periods, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return _figure(name, fig, title)


# ---------------------------------------------------------------------------
# one section per kind


def _solve_sections(d: dict, title: str = "") -> list[str]:
    cur = d.get("currency", "")
    out = [_cards([
        ("status", d["status"]), ("objective (" + str(d.get("objective_kind")) + ")", _money(d.get("objective"), cur)),
        ("proven bound", _money(d.get("bound"), cur)),
        ("gap", "-" if d.get("gap") is None else f"{100 * d['gap']:.2f} %"),
        ("total cost", _money(d.get("total_cost"), cur)), ("NPV", _money(d.get("npv"), cur)),
        ("LP / root bound", f"{_money(d.get('relaxation_bound'))} / {_money(d.get('root_bound'))}"),
    ])]
    audit = d.get("audit")
    if audit == []:
        out.append('<p class="ok">Audit passed: every constraint and the cost recomputed from the plan\'s rows.</p>')
    elif audit:
        out.append('<p class="bad">Audit FAILED: ' + _e("; ".join(audit[:5])) + "</p>")
    if d.get("warnings"):
        out.append('<h2>Warnings</h2><ul class="warn">' + "".join(f"<li>{_e(w)}</li>" for w in d["warnings"])
                   + "</ul>")
    if d.get("diagnosis"):
        out.append("<h2>Why there is no plan</h2><ul>" + "".join(
            f"<li><b>{_e(x['kind'])}</b>: {_e(x['message'])}</li>" for x in d["diagnosis"]) + "</ul>")
    if d["status"] not in ("optimal", "feasible"):
        return out
    costs = d["costs"]
    bp = costs["by_pricing"]
    out.append("<h2>Cost by pricing kind</h2>")
    out.append(_bars("cost-by-pricing", [r["pricing"] for r in bp], [r["cost"] for r in bp],
                     "Cost by pricing kind", cur))
    bw = costs["by_workload"]
    out.append("<h2>Cost by workload</h2>")
    out.append(_bars("cost-by-workload", [r["workload"] for r in bw], [r["cost"] for r in bw],
                     "Cost by workload (shared capacity split by GPU-hours; unused capacity is (idle))", cur))
    usage = d.get("usage") or []
    # the problem's period order (the JSON's ``periods``), not the order rows happen to come in
    periods = [p["period"] for p in d.get("periods") or []] or list(dict.fromkeys(r["period"] for r in usage))
    if usage:
        series: dict[str, list[float]] = {}
        for r in usage:
            series.setdefault(r["offering"], [0.0] * len(periods))[periods.index(r["period"])] += r["capacity_gpus"]
        out.append("<h2>Fleet over the periods</h2>")
        out.append(_stacked("fleet", periods, series, "GPUs held or rented per period, by offering", "GPUs"))
        committed = [r for r in usage if r["pricing"] in ("reserved", "owned")]
        if committed:
            util: dict[str, list[float]] = {}
            for r in committed:
                v = r.get("utilisation")
                util.setdefault(r["offering"], [math.nan] * len(periods))[periods.index(r["period"])] = (
                    100 * v if v is not None else math.nan)
            out.append("<h2>Utilisation of reserved and owned capacity</h2>")
            out.append(_lines("utilisation", periods, util, "Busy share of committed GPUs", "%"))
    if d.get("training"):
        out.append("<h2>Training schedule</h2>")
        out.append(_gantt(d["training"], periods))
    out.append("<h2>Commitments</h2>")
    out.append(_table(d.get("commitments") or [], ["offering", "pricing", "units", "new_units", "gpus",
                                                   "months_after_horizon", "owed_after_horizon", "capex_spent",
                                                   "book_value_at_end"]))
    ah = d.get("after_horizon") or {}
    out.append(f"<p>After the horizon: {_money(ah.get('owed_after_horizon'), cur)} still owed on reservations; "
               f"{_money(ah.get('capex_spent'), cur)} spent on servers, {_money(ah.get('book_value_at_end'), cur)}"
               " of it not yet depreciated.</p>")
    return out


def _lines(name: str, xs: list[str], series: dict[str, list[float]], title: str, unit: str,
           numeric: bool = False) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.4))
    styles = ["-", "--", "-.", ":"]
    for i, (label, vals) in enumerate(series.items()):
        x = xs if numeric else range(len(xs))
        ax.plot(x, vals, styles[i % 4], marker="o", markersize=3, label=label, alpha=0.9)
    if not numeric:
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.grid(alpha=0.3)
    return _figure(name, fig, title)


def _gantt(training: list[dict], periods: list[str]) -> str:
    plt = _plt()
    jobs = list(dict.fromkeys(r["job"] for r in training))
    order = {p: i for i, p in enumerate(periods)}
    offs = list(dict.fromkeys(r["offering"] for r in training))
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(jobs) + 1.2))
    for r in training:
        i = order.get(r["period"])
        if i is None:
            continue
        ax.broken_barh([(i, 0.9)], (jobs.index(r["job"]) - 0.35, 0.7), color=cmap(offs.index(r["offering"]) % 10))
        ax.text(i + 0.45, jobs.index(r["job"]), f"{r['hours']:.0f} h", ha="center", va="center", fontsize=6,
                color="white")
    ax.set_yticks(range(len(jobs)))
    ax.set_yticklabels(jobs)
    ax.set_xticks(range(len(periods)))
    ax.set_xticklabels(periods, rotation=60, ha="right", fontsize=7)
    ax.set_xlim(0, max(len(periods), 1))
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=cmap(i % 10), label=o) for i, o in enumerate(offs)], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.set_title("Training clusters by period (hours run), coloured by offering")
    return _figure("training-gantt", fig, "Training schedule")


def _whatif_sections(d: dict) -> list[str]:
    base, new, delta = d["base"], d["scenario"], d["delta"]
    cur = base.get("currency", "")
    ch = d.get("change", {})
    out = [f"<p>Change: <code>{_e(' '.join([*ch.get('set', []), *ch.get('scale', [])]))}</code></p>"]
    dobj = None
    if base.get("objective") is not None and new.get("objective") is not None:
        dobj = new["objective"] - base["objective"]
    out.append(_cards([("base objective", _money(base.get("objective"), cur)),
                       ("scenario objective", _money(new.get("objective"), cur)),
                       ("delta", _money(dobj, cur))]))
    rows = delta.get("cost_by_pricing") or []
    if rows:
        labels = [r.get("pricing", "") for r in rows]
        out.append("<h2>Cost delta by pricing kind</h2>")
        out.append(_bars("whatif-delta", labels, [r.get("delta") or 0.0 for r in rows],
                         "Scenario minus base, by pricing kind", cur))
    for key, val in delta.items():
        if isinstance(val, list) and val and isinstance(val[0], dict) and key != "cost_by_pricing":
            out.append(f"<h2>{_e(key.replace('_', ' '))}</h2>" + _table(val))
    out.append("<h2>Base plan</h2>")
    out += _solve_sections(base)
    out.append("<h2>Scenario plan</h2>")
    out += _solve_sections(new)
    return out


def _failed_audits(lines: list[str]) -> list[str]:
    """A banner naming every plan that failed its audit (a bug in gpuopt), or nothing."""
    from ..studies.whatif import AUDIT_HEADING

    if not lines:
        return []
    return [f'<p class="bad">{_e(AUDIT_HEADING)}: '
            + _e("; ".join(lines[:10])) + (f"; and {len(lines) - 10} more" if len(lines) > 10 else "") + "</p>"]


def _scenario_sections(d: dict) -> list[str]:
    """Scenarios side by side (``gpuopt whatif P`` with scenarios): objectives, gaps, costs by kind, mixes."""
    from ..studies.whatif import GAP_NOTE, audit_failures, scenario_records

    cur = d.get("currency", "")
    rows = d["scenarios"]
    out = _failed_audits(audit_failures((r.get("name"), r.get("audit")) for r in rows))
    ok = [r for r in rows if r.get("objective") is not None]
    if ok:
        out.append("<h2>Objective per scenario</h2>")
        out.append(_bars("scenarios", [r["name"] for r in ok], [r["objective"] for r in ok],
                         "Objective per scenario (the base first)", cur))
    out.append(f"<h2>Scenarios side by side ({_e(cur)})</h2>" + _table(scenario_records(rows)))
    if any(r.get("status") == "feasible" for r in rows):
        out.append(f"<p>{_e(GAP_NOTE)}</p>")
    described = [r for r in rows if r.get("description")]
    if described:
        out.append("<h2>Descriptions</h2><ul>" + "".join(
            f"<li><b>{_e(r['name'])}</b>: {_e(r['description'])}</li>" for r in described) + "</ul>")
    bad = [r for r in rows if r.get("objective") is None]
    if bad:
        out.append("<h2>No plan</h2><ul>" + "".join(
            f"<li><b>{_e(r.get('name'))}</b>: {_e(r.get('status'))}: {_e(r.get('message'))}</li>" for r in bad)
            + "</ul>")
    return out


def _sweep_sections(d: dict) -> list[str]:
    from ..studies.whatif import audit_failures

    cur = d.get("currency", "")
    pts = d["points"]
    dims = d["dimensions"]
    out = [f"<p>{len(pts)} points over {_e(', '.join(x.get('label', '') for x in dims))}.</p>"]
    out += _failed_audits(audit_failures((f"point {p.get('index')}", p.get("audit")) for p in pts))
    first = dims[0].get("label", "value") if dims else "value"
    # each point's values: {dimension label: value}
    xs = [(p.get("values") or {}).get(first) if isinstance(p.get("values"), dict) else None for p in pts]
    if len(dims) == 1 and all(isinstance(x, (int, float)) for x in xs):
        series = {"objective": [p.get("objective") if p.get("objective") is not None else math.nan for p in pts]}
        fig_html = _lines("sweep-objective", xs, series, f"Objective against {first}", cur, numeric=True)
        out.append("<h2>Objective</h2>" + fig_html)
    bps = d.get("break_points") or []
    out.append("<h2>Break points</h2>" + (_table(bps) if bps else "<p>(none: the mix never changes)</p>"))
    out.append("<h2>Points</h2>" + _table([{**(p.get("values") or {}), "mix": p.get("mix") if isinstance(
        p.get("mix"), str) else "; ".join(f"{k} {v}" for k, v in (p.get("mix") or {}).items()),
        **{k: v for k, v in p.items() if not isinstance(v, (dict, list)) and k != "mix"}} for p in pts]))
    return out


def _rentbuy_sections(d: dict) -> list[str]:
    cur = d.get("currency", "")
    out = [_cards([("best strategy", d.get("best_strategy") or "-"), ("mix objective", _money(d.get("mix_objective"), cur)),
                   ("mix NPV", _money(d.get("mix_npv"), cur))])]
    out += _failed_audits(d.get("audit_failures") or [])
    strat = d.get("strategies") or []
    ok = [s for s in strat if s.get("objective") is not None]
    if ok:
        out.append("<h2>Strategies</h2>")
        out.append(_bars("strategies", [s["name"] for s in ok], [s["objective"] for s in ok],
                         "Objective per strategy", cur))
        out.append(_table(strat, ["name", "status", "objective", "total_cost", "npv", "vs_best", "new_owned_units",
                                  "summary"]))
    yearly = (d.get("cash_flows") or {}).get("yearly") or []
    if yearly:
        out.append("<h2>Cash flows of the mix</h2>")
        out.append(_bars("cash-flows", [f"year {r['year']}" for r in yearly], [r["net_cash_out"] for r in yearly],
                         "Net cash out per year (positive = paid)", cur))
        out.append(f"<p>NPV of the cash flows: {_money((d.get('cash_flows') or {}).get('npv'), cur)}</p>")
    sens = d.get("sensitivity") or []
    if sens:
        out.append("<h2>Sensitivity</h2>")
        out.append(_tornado(sens, cur))
    be = d.get("break_even") or []
    if be:
        out.append("<h2>Break-even</h2>" + _table(be, ["offering", "capex_current", "capex", "outcome",
                                                        "utilisation", "verdict", "payback_months"]))
    return out


def _tornado(rows: list[dict], cur: str) -> str:
    plt = _plt()
    rows = sorted(rows, key=lambda r: abs(r.get("swing") or 0.0))
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.2))
    for i, r in enumerate(rows):
        lo, hi = r.get("delta_low") or 0.0, r.get("delta_high") or 0.0
        ax.barh(i, lo, color="#4477aa", label="low" if i == 0 else None)
        ax.barh(i, hi, color="#cc6677", label="high" if i == 0 else None)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["parameter"] for r in rows])
    ax.axvline(0, color="#333", linewidth=0.8)
    ax.set_xlabel(f"objective change ({cur})")
    ax.legend(fontsize=7, frameon=False)
    ax.set_title("Tornado: the mix's objective when one input moves down and up")
    return _figure("tornado", fig, "Sensitivity")


def report_html(doc: dict) -> str:
    """The whole page for the JSON ``doc`` of a solve, whatif, sweep or rentbuy."""
    kind = kind_of(doc)
    name = doc.get("problem") or (doc.get("base") or {}).get("problem") or "problem"
    sections = {"solve": _solve_sections, "whatif": _whatif_sections, "scenarios": _scenario_sections,
                "sweep": _sweep_sections, "rentbuy": _rentbuy_sections}[kind](doc)
    catalog = doc.get("catalog_version") or (doc.get("base") or {}).get("catalog_version") or ""
    head = (f"<h1>gpuopt {kind}: {_e(name)}</h1><p class=\"sub\">catalog {_e(catalog)}; every number below is "
            "in the JSON of the same run</p>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>gpuopt {kind}: {_e(name)}</title><style>{_CSS}</style>{_CHECK}</head><body>"
            + head + "".join(sections) + "</body></html>\n")
