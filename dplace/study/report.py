"""Study reports for ``dplace bench``: per-instance best bounds, gaps, per-method summary, files, plots.

Rows come from :func:`dplace.study.pair.run_pair` (one per instance x method x repeat). This module only
reads them: :func:`aggregate` adds the fields that depend on every row of an instance, :func:`summarize`
gives one line per method, :func:`write_outputs` writes ``results.csv``, ``results.json``, ``report.md``
and the PNG plots (matplotlib, Agg canvas, no pyplot state).

Definitions (the same as :func:`dplace.result.compute_gap`):
  best bound of an instance  = :func:`dplace.verify.claims.best_bound`: max of :func:`dplace.lower_bound`
                               (``project_bound``), of every run's proven ``lower_bound`` and of the
                               makespan of ok runs with status ``optimal`` (rows that solved a
                               transformed graph are left out: their bound is for another problem);
  gap to bound               = (makespan - best bound) / makespan;
  gap to best                = (makespan - best makespan found) / makespan;
a run is *ok* when it has a makespan, keeps memory and passes :func:`dplace.check`; gaps, wins and the
best makespan use ok runs only.
"""
from __future__ import annotations

import csv
import io
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..verify import claims
from ..instance.io import save_json, write_atomic
from ..result import compute_gap

BENCH_FORMAT = "dplace-bench/1"

# Columns of a row as the worker records it, then the ones :func:`aggregate` derives.
RUN_FIELDS = [
    "key", "instance", "group", "instance_name", "instance_file", "instance_sha", "n_ops", "n_edges", "n_devices",
    "comm", "method", "repeat", "seed", "time_limit_s", "status", "makespan", "lower_bound", "project_bound",
    "claimed_makespan", "memory_ok", "check_ok", "check_errors", "peak_memory", "transformed", "time_s",
    "wall_s", "host", "error", "dplace_version",
]
DERIVED_FIELDS = ["ok", "best_bound", "bound_from", "best_makespan", "gap_to_bound", "gap_to_best", "win",
                  "below_bound"]
FIELDS = RUN_FIELDS + DERIVED_FIELDS
FAILED_STATUSES = ("error", "timeout", "crashed")


def is_ok(row: dict[str, Any]) -> bool:
    """A usable answer: a simulated makespan that keeps memory and passes the checker."""
    return row.get("makespan") is not None and bool(row.get("memory_ok")) and bool(row.get("check_ok"))


def aggregate(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of ``rows`` with the per-instance fields (:data:`DERIVED_FIELDS`) filled in."""
    out = [dict(r) for r in rows]
    by_inst: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in out:
        by_inst[r["instance"]].append(r)
    for group in by_inst.values():
        pb = group[0].get("project_bound")
        best = claims.best_bound([dict(r, ok=is_ok(r)) for r in group],
                                 base=None if pb is None else claims.Bound(pb, "lower_bound()"))
        best_bound, bound_from = (None, None) if best is None else (best.value, best.source)
        spans = [r["makespan"] for r in group if is_ok(r)]
        best_span = min(spans) if spans else None
        for r in group:
            ok = is_ok(r)
            r["ok"] = ok
            r["best_bound"] = best_bound
            r["bound_from"] = bound_from
            # a usable schedule of the same problem below a proven bound: a bound or an "optimal" is wrong
            r["below_bound"] = bool(ok and best_bound is not None and not r.get("transformed")
                                    and claims.refutes(r["makespan"], best_bound))
            r["best_makespan"] = best_span
            r["gap_to_bound"] = compute_gap(r["makespan"], best_bound) if ok else None
            r["gap_to_best"] = compute_gap(r["makespan"], best_span) if ok else None
            r["win"] = bool(ok and best_span is not None and r["makespan"] <= best_span + claims.tol(best_span))
    return out


def _stats(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    if not values:
        return None, None, None
    return statistics.fmean(values), statistics.median(values), max(values)


def summarize(rows: Sequence[dict[str, Any]], methods: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One dict per method over aggregated ``rows``: counts, gap statistics, wins, times.

    ``wins`` counts instances where the method's best run reaches the best makespan found (ties win)."""
    order = list(methods) if methods else sorted({r["method"] for r in rows})
    by_method: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_method[r["method"]].append(r)
    summary = []
    for m in order:
        rs = by_method.get(m, [])
        ok = [r for r in rs if r.get("ok")]
        gb = [r["gap_to_bound"] for r in ok if r.get("gap_to_bound") is not None]
        gs = [r["gap_to_best"] for r in ok if r.get("gap_to_best") is not None]
        times = [r["time_s"] for r in rs if r.get("time_s") is not None and r.get("status") not in FAILED_STATUSES]
        wins = len({r["instance"] for r in ok if r.get("win")})
        mean_b, med_b, max_b = _stats(gb)
        mean_s, med_s, max_s = _stats(gs)
        mean_t, med_t, max_t = _stats(times)
        summary.append({
            "method": m, "runs": len(rs), "ok": len(ok),
            "optimal": sum(1 for r in ok if r.get("status") == "optimal"),
            "infeasible": sum(1 for r in rs if r.get("status") in ("infeasible", "no_solution")),
            "memory_violations": sum(1 for r in rs if r.get("makespan") is not None and not r.get("memory_ok")),
            "check_failures": sum(1 for r in rs if r.get("makespan") is not None and r.get("check_ok") is False),
            "errors": sum(1 for r in rs if r.get("status") in ("error", "crashed")),
            "timeouts": sum(1 for r in rs if r.get("status") == "timeout"),
            "below_bound": sum(1 for r in rs if r.get("below_bound")),
            "mean_gap_to_bound": mean_b, "median_gap_to_bound": med_b, "max_gap_to_bound": max_b,
            "mean_gap_to_best": mean_s, "median_gap_to_best": med_s, "max_gap_to_best": max_s,
            "wins": wins, "mean_time_s": mean_t, "median_time_s": med_t, "max_time_s": max_t,
            "total_time_s": sum(times) if times else 0.0,
        })
    return summary


def per_instance(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per instance (first-seen order): size, best bound, best makespan, winners."""
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        d = seen.setdefault(r["instance"], {
            "instance": r["instance"], "n_ops": r.get("n_ops"), "n_devices": r.get("n_devices"),
            "best_bound": r.get("best_bound"), "bound_from": r.get("bound_from"),
            "best_makespan": r.get("best_makespan"), "winners": [],
            "runs": 0, "ok": 0,
        })
        d["runs"] += 1
        d["ok"] += bool(r.get("ok"))
        if r.get("win") and r["method"] not in d["winners"]:
            d["winners"].append(r["method"])
    for d in seen.values():
        d["gap_of_best"] = compute_gap(d["best_makespan"], d["best_bound"])
    return list(seen.values())


# ---------------------------------------------------------------------------------------------- files
def _csv_cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return "; ".join(str(x) for x in v)
    return v


def results_csv(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _csv_cell(r.get(k)) for k in FIELDS})
    return buf.getvalue()


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100.0 * v:.2f}%"


def _sec(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.3g}" if v < 10 else f"{v:.1f}"


def _num(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.6g}"


def _md_table(header: Sequence[str], lines: Iterable[Sequence[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for line in lines:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in line) + " |")
    return "\n".join(out)


def summary_table_rows(summary: Sequence[dict[str, Any]], *, short: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the per-method summary (shared by report.md and the CLI's rich table)."""
    if short:
        header = ["method", "runs", "ok", "opt", "fail", "gap mean", "gap med", "gap max", "to best", "wins",
                  "t mean s", "t max s"]
    else:
        header = ["method", "runs", "ok", "optimal", "failed", "mean gap", "median gap", "max gap",
                  "mean gap to best", "wins", "mean time s", "max time s"]
    lines = []
    for s in summary:
        failed = s["errors"] + s["timeouts"] + s["infeasible"] + s["memory_violations"] + s["check_failures"]
        lines.append([
            s["method"], str(s["runs"]), str(s["ok"]), str(s["optimal"]), str(failed),
            _pct(s["mean_gap_to_bound"]), _pct(s["median_gap_to_bound"]), _pct(s["max_gap_to_bound"]),
            _pct(s["mean_gap_to_best"]), str(s["wins"]), _sec(s["mean_time_s"]), _sec(s["max_time_s"]),
        ])
    return header, lines


def _limits_label(rows: Sequence[dict[str, Any]], params: dict[str, Any]) -> str:
    """The time limit the rows were made with (from the rows, not from the last command's parameters)."""
    from collections import Counter

    limits = Counter(r.get("time_limit_s") for r in rows) or Counter({params.get("time_limit_s"): 0})
    if len(limits) == 1:
        return f"time limit {next(iter(limits))} s per run"
    return "time limits differ between runs: " + ", ".join(f"{k} s ({n} runs)" for k, n in sorted(
        limits.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))


def report_markdown(rows: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]],
                    params: dict[str, Any], plots: Sequence[str] = ()) -> str:
    insts = per_instance(rows)
    n_methods = len(summary)
    parts = [
        "# dplace bench report",
        "",
    ]
    if params.get("interrupted"):
        parts += [f"**Interrupted**: {params.get('pairs_finished')} of {params.get('pairs_planned')} planned runs "
                  "finished; the tables below cover those only.", ""]
    parts += [
        f"{len(insts)} instances x {n_methods} methods x {params.get('repeat', 1)} repeat(s) = {len(rows)} runs; "
        f"{_limits_label(rows, params)} (hard wall limit {params.get('hard_limit_s')} s), "
        f"executor {params.get('executor')}, {params.get('workers')} workers, seed {params.get('seed')}.",
        "",
        "Gap = (makespan - best proven lower bound of the instance) / makespan; the best bound is the max of "
        "every run's proven `lower_bound` and of the makespans of runs with status `optimal`. "
        "Gap to best = the same against the best makespan found. Only *ok* runs (simulated makespan, memory "
        "kept, `dplace.check` passed) count for gaps and wins; *failed* counts errors, timeouts, infeasible, "
        "memory violations and checker failures. Times are the method's solve time (incl. the project bound).",
        "",
        "## Per method",
        "",
    ]
    header, lines = summary_table_rows(summary)
    parts.append(_md_table(header, lines))
    groups = list(dict.fromkeys(r.get("group") for r in rows if r.get("group")))
    if len(groups) > 1:
        for g in groups:
            sub = [r for r in rows if r.get("group") == g]
            n_inst = len({r["instance"] for r in sub})
            parts += ["", f"### Group `{g}` ({n_inst} instances)", ""]
            header, lines = summary_table_rows(summarize(sub, [s["method"] for s in summary]))
            parts.append(_md_table(header, lines))
    parts += ["", "## Per instance", ""]
    parts.append(_md_table(
        ["instance", "ops", "devices", "best bound", "bound from", "best makespan", "gap of best", "winners",
         "ok runs"],
        [[d["instance"], str(d["n_ops"]), str(d["n_devices"]), _num(d["best_bound"]), d["bound_from"] or "—",
          _num(d["best_makespan"]),
          _pct(d["gap_of_best"]), ", ".join(d["winners"]) or "—", f"{d['ok']}/{d['runs']}"] for d in insts],
    ))
    failures = [r for r in rows if not r.get("ok")]
    parts += ["", "## Runs without a usable answer", ""]
    if failures:
        parts.append(_md_table(
            ["instance", "method", "repeat", "status", "memory ok", "check ok", "error"],
            [[r["instance"], r["method"], str(r["repeat"]), r["status"], str(r.get("memory_ok")),
              str(r.get("check_ok")), (r.get("error") or r.get("check_errors") or "")[:200]] for r in failures],
        ))
    else:
        parts.append("None.")
    below = [r for r in rows if r.get("below_bound")]
    if below:
        parts += ["", "## Contradictions: makespans below a proven bound", "",
                  "A bound or a claim of optimality is wrong (the gap is shown as 0 above):", ""]
        parts.append(_md_table(
            ["instance", "method", "repeat", "makespan", "best bound", "bound from"],
            [[r["instance"], r["method"], str(r["repeat"]), _num(r["makespan"]), _num(r["best_bound"]),
              str(r.get("bound_from"))] for r in below],
        ))
    transformed = [r for r in rows if r.get("transformed")]
    if transformed:
        parts += ["", f"{len(transformed)} run(s) solved a transformed graph (e.g. split ops): their makespans count, "
                  "their bounds do not."]
    if params.get("left_out"):
        parts += ["", "Left out (the method is registered for smaller graphs; name it in --methods to run it): "
                  + "; ".join(params["left_out"]) + "."]
    if plots:
        parts += ["", "## Plots", ""]
        parts += [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
    return "\n".join(parts) + "\n"


def write_outputs(out: str | Path, rows: Sequence[dict[str, Any]], params: dict[str, Any],
                  methods: Sequence[str] | None = None, *, plots: bool = True) -> dict[str, Any]:
    """Aggregate ``rows`` and (re)write results.csv, results.json, report.md and the plots in ``out``.

    Returns ``{"rows": aggregated rows, "summary": per-method summary, "files": paths written}``."""
    out = Path(out)
    agg = aggregate(rows)
    summary = summarize(agg, methods)
    files = []
    plot_files = write_plots(out, agg, methods) if plots and agg else []
    write_atomic(out / "results.csv", results_csv(agg))
    save_json(out / "results.json", {"format": BENCH_FORMAT, "params": params, "summary": summary, "rows": agg})
    write_atomic(out / "report.md", report_markdown(agg, summary, params, plot_files))
    files += [str(out / "results.csv"), str(out / "results.json"), str(out / "report.md")] + plot_files
    return {"rows": agg, "summary": summary, "files": files}


# ---------------------------------------------------------------------------------------------- plots
def _scale(values: Sequence[float]) -> str:
    """Log scale only where the values span more than a factor 20."""
    vals = [v for v in values if v > 0]
    return "log" if vals and max(vals) > 20 * min(vals) else "linear"


def _save_fig(fig: Any, path: Path) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    write_atomic(path, buf.getvalue())
    return str(path)


def write_plots(out: str | Path, rows: Sequence[dict[str, Any]], methods: Sequence[str] | None = None,
                *, per_page: int = 12) -> list[str]:
    """Gap distribution per method, time vs graph size, makespan vs time per instance (pages of
    ``per_page`` instances). Returns the PNG paths written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(out)
    order = list(methods) if methods else sorted({r["method"] for r in rows})
    if len(order) <= 10:
        colors = {m: f"C{i}" for i, m in enumerate(order)}
    else:  # 20 distinct colours, then markers tell the rest apart
        from matplotlib import colormaps

        tab = colormaps["tab20"]
        colors = {m: tab(i % 20) for i, m in enumerate(order)}
    markers = "osD^v<>pP*Xh"
    mark = {m: markers[i % len(markers)] for i, m in enumerate(order)}
    files = []

    # 1. gap to the best bound, per method
    fig = Figure(figsize=(max(5.0, 0.9 * len(order) + 2), 4.2))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    data = [[100.0 * r["gap_to_bound"] for r in rows if r["method"] == m and r.get("gap_to_bound") is not None]
            for m in order]
    pos = [i + 1 for i, d in enumerate(data) if d]
    if pos:
        ax.boxplot([d for d in data if d], positions=pos, widths=0.5, showfliers=False)
        for i, d in enumerate(data):
            if d:  # deterministic jitter
                xs = [i + 1 + 0.18 * (((k * 0.618034) % 1.0) - 0.5) for k in range(len(d))]
                ax.scatter(xs, d, s=12, alpha=0.6, color=colors[order[i]], zorder=3)
    ax.set_xticks(range(1, len(order) + 1), order, rotation=30, ha="right")
    ax.set_ylabel("gap to best proven bound (%)")
    ax.set_title("Gap distribution per method")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    files.append(_save_fig(fig, out / "gap_by_method.png"))

    # 2. solve time vs graph size
    fig = Figure(figsize=(6.4, 4.4))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    allx, ally = [], []
    for m in order:
        pts = [(r["n_ops"], max(r["time_s"], 1e-5)) for r in rows
               if r["method"] == m and r.get("time_s") is not None and r.get("n_ops")]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=m, color=colors[m], marker=mark[m], s=22, alpha=0.8)
            allx += [p[0] for p in pts]
            ally += [p[1] for p in pts]
    ax.set_xscale(_scale(allx))
    ax.set_yscale(_scale(ally))
    ax.set_xlabel("ops in the graph")
    ax.set_ylabel("solve time (s)")
    ax.set_title("Solve time vs graph size")
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    files.append(_save_fig(fig, out / "time_vs_size.png"))

    # 3. makespan vs time, one panel per instance
    insts = list(dict.fromkeys(r["instance"] for r in rows))
    pages = [insts[i:i + per_page] for i in range(0, len(insts), per_page)] or [[]]
    for p, page in enumerate(pages):
        cols = min(4, max(1, len(page)))
        nrows = max(1, math.ceil(len(page) / cols))
        fig = Figure(figsize=(3.4 * cols, 2.8 * nrows + 0.6))
        FigureCanvasAgg(fig)
        axes = fig.subplots(nrows, cols, squeeze=False)
        for k, ax in enumerate(axes.flat):
            if k >= len(page):
                ax.set_visible(False)
                continue
            name = page[k]
            rs = [r for r in rows if r["instance"] == name]
            allx = []
            for m in order:
                pts = [(max(r["time_s"] or 0.0, 1e-5), r["makespan"]) for r in rs if r["method"] == m and r.get("ok")]
                allx += [q[0] for q in pts]
                if pts:
                    ax.scatter([q[0] for q in pts], [q[1] for q in pts], color=colors[m], marker=mark[m], s=24,
                               label=m, alpha=0.85)
            bb = rs[0].get("best_bound") if rs else None
            if bb is not None:
                ax.axhline(bb, color="k", ls="--", lw=0.8, label="best bound")
            ax.set_xscale(_scale(allx))
            ax.set_title(name, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        fig.supxlabel("solve time (s)", fontsize=9)
        fig.supylabel("makespan (µs)", fontsize=9)
        handles, labels = [], []
        for ax in axes.flat:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        if handles:
            fig.legend(handles, labels, loc="upper center", ncol=min(6, len(labels)), fontsize=7)
        fig.tight_layout(rect=(0, 0, 1, 0.93 if handles else 1))
        suffix = "" if len(pages) == 1 else f"_{p + 1}"
        files.append(_save_fig(fig, out / f"makespan_vs_time{suffix}.png"))
    return files
