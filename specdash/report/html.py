"""`specdash report`: stored runs as one self-contained HTML page (inline CSS and SVG; no script, no font, no
network), and the same charts as figures for `--png`.

Sections: the verdict (and alarms), the charts (tok/s by C, speedup, Pareto, latency, acceptance, goodput
under an SLO), the per-level tables, and each run's provenance.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from matplotlib.figure import Figure

from specdash import __version__
from specdash.bench.run_data import RunData, alarms, runs_verdict, series_names, workload_mismatches
from specdash.core.compare import CrossoverKind, compute_crossover
from specdash.core.verdict import speedups
from specdash.report import charts
from specdash.slo import Slo

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 70rem;
       padding: 0 1rem; color: #1d1d1f; background: #fff; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
.meta { color: #555; font-size: .85rem; }
.verdict { font-size: 1.1rem; padding: .8rem 1rem; border-left: 5px solid #2ca02c; background: #f2f8f2; }
.alarm { padding: .6rem 1rem; border-left: 5px solid #d62728; background: #fdf1f1; margin: .5rem 0; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(30rem, 1fr)); gap: 1rem; }
figure { margin: 0; } figure svg { width: 100%; height: auto; }
table { border-collapse: collapse; font-size: .85rem; margin: .5rem 0 1rem; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .6rem; text-align: right; }
th { background: #f5f5f7; } td.l, th.l { text-align: left; }
.good { color: #1a7f37; } .bad { color: #c62828; }
code, pre { font-family: ui-monospace, Menlo, monospace; font-size: .8rem; }
pre { white-space: pre-wrap; word-break: break-all; background: #f5f5f7; padding: .5rem; }
"""


def _f(v: float | None, fmt: str = ",.1f") -> str:
    return "–" if v is None else format(v, fmt)


def _e(text: object) -> str:
    return html.escape(str(text))


@dataclass
class Report:
    """The page and its figures."""

    html: str
    """The whole page."""
    figures: dict[str, Figure]
    """Chart name -> figure (for `--png`)."""


def _series(runs: Sequence[RunData], names: Sequence[str]) -> list[charts.Series]:
    out = []
    for name, r in zip(names, runs, strict=True):
        done = [lv for lv in r.levels if lv.status == "done"]
        extra: dict[str, dict[int, float | None]] = {
            f"{m}_{p}": {lv.concurrency: lv.pct(f"{m}_ms", p) for lv in done}
            for m in ("ttft", "tpot")
            for p in ("p50", "p90")
        }
        extra["accept"] = {lv.concurrency: lv.accept_length for lv in done}
        out.append(charts.Series(name, r.curve(), extra))
    return out


def build_figures(runs: Sequence[RunData], slo: Slo | None = None, tpot_pct: str = "p50") -> dict[str, Figure]:
    """The report's charts by name: tok_s, speedup, pareto, pareto_per_gpu, latency, acceptance, goodput."""
    names = series_names(runs)
    series = _series(runs, names)
    figs: dict[str, Figure] = {}
    crossover = None
    if len(runs) >= 2:
        x = compute_crossover(runs[0].curve(), runs[1].curve())
        crossover = x.concurrency if x.kind is CrossoverKind.CROSSES else None
    figs["tok_s"] = charts.tok_s_chart(series, crossover)
    if len(runs) >= 2:
        ratios = [charts.Series(s.name, speedups(series[0].points, s.points)) for s in series[1:]]
        figs["speedup"] = charts.speedup_chart(names[0], ratios)
    points = [p for r, n in zip(runs, names, strict=True) for p in _renamed(r.pareto(tpot_pct), n)]
    if points:
        figs["pareto"] = charts.pareto_chart(points, tpot_label=tpot_pct)
        if any(p.gpus > 1 for p in points):
            figs["pareto_per_gpu"] = charts.pareto_chart(points, per_gpu=True, tpot_label=tpot_pct)
    figs["latency"] = charts.latency_chart(series)
    if any(v is not None for s in series for v in s.extra["accept"].values()):
        figs["acceptance"] = charts.acceptance_chart(series)
    if slo is not None:
        goodput = [charts.Series(n, r.goodput()) for n, r in zip(names, runs, strict=True)]
        figs["goodput"] = charts.goodput_chart(goodput, slo.text)
    return figs


def _renamed(points: list[Any], name: str) -> list[Any]:
    from dataclasses import replace

    return [replace(p, mode=name) for p in points]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 0) -> str:
    def cell(tag: str, i: int, v: str) -> str:
        cls = ' class="l"' if i < left else ""
        return f"<{tag}{cls}>{v}</{tag}>"

    head = "".join(cell("th", i, _e(h)) for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _comparison(runs: Sequence[RunData], names: Sequence[str]) -> str:
    levels = sorted({c for r in runs for c in r.curve()} | {c for r in runs for c in r.failures()})

    def value(r: RunData, c: int) -> str:
        v, why = r.curve().get(c), r.failures().get(c)
        return f'<span class="bad" title="{_e(why)}">✗ failed</span>' if v is None and why else _f(v)

    header = ["C", f"{names[0]} tok/s"]
    for n in names[1:]:
        header += [f"{n} tok/s", "speedup", "Δ %"]
    base = runs[0].curve()
    rows = []
    for c in levels:
        row = [str(c), value(runs[0], c)]
        for r in runs[1:]:
            v, b = r.curve().get(c), base.get(c)
            if v is None or not b:
                row += [value(r, c), "–", "–"]
            else:
                cls = "good" if v > b else "bad"
                row += [_f(v), f'<span class="{cls}">{v / b:.2f}x</span>', f"{(v / b - 1) * 100:+.1f}"]
        rows.append(row)
    return _table(header, rows)


def _levels_table(r: RunData, reference: Mapping[int, float] | None) -> str:
    header = [
        "C",
        "status",
        "tok/s",
        "speedup",
        "TTFT p50",
        "TTFT p90",
        "TPOT p50",
        "TPOT p90",
        "tok/s/user",
        "accept",
        "ok",
        "failed",
    ]
    has_slo = any(lv.slo is not None for lv in r.levels)
    if has_slo:
        header += ["SLO", "attain %", "goodput req/s", "goodput tok/s"]
    rows = []
    for lv in r.levels:
        ref = (reference or {}).get(lv.concurrency)
        tpot = lv.pct("tpot_ms")
        row = [
            str(lv.concurrency),
            _e(f"{lv.status}: {lv.reason}" if lv.reason else lv.status),
            _f(lv.tok_s) if lv.stats else "–",
            f"{lv.tok_s / ref:.2f}x" if ref and lv.status == "done" else "–",
            _f(lv.pct("ttft_ms")),
            _f(lv.pct("ttft_ms", "p90")),
            _f(tpot, ".2f"),
            _f(lv.pct("tpot_ms", "p90"), ".2f"),
            _f(1000 / tpot if tpot else None),
            _f(lv.accept_length, ".2f"),
            str(lv.stats.get("completed", 0)),
            str(lv.stats.get("failed", 0)),
        ]
        if has_slo:
            s = lv.slo
            if s is None:
                row += ["–"] * 4
            else:
                mark = '<span class="good">met</span>' if s.meets else '<span class="bad">missed</span>'
                row += [mark, f"{s.attainment * 100:.0f}", _f(s.request_goodput, ".2f"), _f(s.token_goodput)]
        rows.append(row)
    notes = "".join(f"<li>C={lv.concurrency}: {_e(w)}</li>" for lv in r.levels for w in lv.warnings)
    return _table(header, rows) + (f"<ul class='meta'>{notes}</ul>" if notes else "")


def _acceptance(r: RunData) -> str:
    """Per level: mean accept length, share of output tokens from drafts, per-position acceptance (where the
    engine exposes them); empty for a run that reported no acceptance."""
    rows = []
    for lv in r.levels:
        share = lv.server.get("draft_share")
        positions = lv.server.get("accept_per_position") or []
        if lv.accept_length is None and share is None and not positions:
            continue
        rows.append(
            [
                str(lv.concurrency),
                _f(lv.accept_length, ".2f"),
                "–" if share is None else f"{share * 100:.0f} %",
                " · ".join(f"{p * 100:.0f} %" for p in positions) or "–",
                _e(lv.server.get("accept_source") or ""),
            ]
        )
    if not rows:
        return ""
    return _table(["C", "accept length", "output from drafts", "accepted by position (1st, 2nd, ...)", "source"], rows)


def _provenance(r: RunData) -> str:
    m = r.record.meta
    p = r.provenance
    gpus = p.get("gpus") or {}
    command = p.get("command")
    rows = [
        ("run", f"{r.id} · {m.mode} · {r.record.created} · {r.record.status}"),
        ("host", m.host),
        ("engine", f"{m.engine or '?'} {m.engine_version}".strip()),
        ("command", " ".join(str(a) for a in command) if command else str(p.get("command_source") or "(not recorded)")),
        *([("command read from", str(p["command_source"]))] if command and p.get("command_source") else []),
        (
            "GPUs",
            f"{gpus.get('count')} x {', '.join(gpus.get('models') or [])}, driver {gpus.get('driver')}"
            if gpus
            else "(no nvidia-smi on the host)",
        ),
        ("GPUs per replica set (TP x DP)", str(r.gpus)),
        ("specdash", str(p.get("specdash", "(before provenance was recorded)"))),
        ("workload", json.dumps(r.workload, sort_keys=True)),
        ("fingerprint", str(p.get("fingerprint", "–"))),
        ("SLO", str(p.get("slo") or "–")),
    ]
    body = "".join(f"<tr><th class='l'>{_e(k)}</th><td class='l'><code>{_e(v)}</code></td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def build_report(
    runs: Sequence[RunData], *, slo: Slo | None = None, tpot_pct: str = "p50", forced: Sequence[str] = ()
) -> Report:
    """The page for `runs` (the first is the reference mode)."""
    names = series_names(runs)
    figures = build_figures(runs, slo, tpot_pct)
    text = runs_verdict(runs, slo) or "no finished level in these runs"
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>specdash report: {_e(', '.join(names))}</title><style>{CSS}</style></head><body>",
        "<h1>specdash report</h1>",
        f"<p class='meta'>runs {_e(', '.join(f'{n} (#{r.id})' for n, r in zip(names, runs, strict=True)))} · "
        f"generated {datetime.now(UTC).isoformat(timespec='seconds')} by specdash {_e(__version__)}</p>",
        f"<p class='verdict' id='verdict'>{_e(text)}</p>",
    ]
    for a in alarms(runs):
        parts.append(f"<p class='alarm'>⚠ {_e(a)}</p>")
    mismatches = list(forced) or workload_mismatches(runs)
    for m in mismatches:
        parts.append(f"<p class='alarm'>⚠ not like for like (compared with --force): {_e(m)}</p>")
    parts.append("<h2>Charts</h2><div class='charts'>")
    for name, fig in figures.items():
        parts.append(f"<figure id='chart-{name}'>{charts.to_svg(fig)}</figure>")
    parts.append("</div>")
    if len(runs) >= 2:
        parts.append(f"<h2>Comparison (reference: {_e(names[0])})</h2>")
        parts.append(_comparison(runs, names))
    for name, r in zip(names, runs, strict=True):
        parts.append(f"<h2>{_e(name)}: levels</h2>")
        parts.append(_levels_table(r, runs[0].curve() if r is not runs[0] else None))
    panels = [(name, _acceptance(r)) for name, r in zip(names, runs, strict=True)]
    if any(p for _, p in panels):
        parts.append("<h2>Acceptance</h2>")
        for name, panel in panels:
            if panel:
                parts.append(f"<h3>{_e(name)}</h3>{panel}")
    parts.append("<h2>Provenance</h2>")
    for name, r in zip(names, runs, strict=True):
        parts.append(f"<h3>{_e(name)}</h3>{_provenance(r)}")
    parts.append("</body></html>\n")
    return Report("".join(parts), figures)
