"""The HTML report (``--compile-accuracy-html``): one self-contained page a CI uploads as an
artifact. Statuses at a glance, the tests that fail the run first; for each failing check its
error table, the deviation along the graph and the minifier's trajectory (inline SVG: no script,
no network), its stage and its files, linked relative to the page."""

from __future__ import annotations

import html
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pytest_torchcompile.common.files import atomic_write
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.results import CaseResult, Deviation, MinifyResult, MinifyStep
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline import (
    BaselineOutcome,
    Decision,
    is_failing,
    test_status,
)
from pytest_torchcompile.reporting.cells import (
    baseline_summary,
    by_test,
    format_minify,
    format_ratio,
    outcome_counts,
    printable,
    status_summary,
)
from pytest_torchcompile.reporting.grouping import RootCause, root_causes

_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2430;
background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px}
h3{font-size:16px;margin:0 0 6px;overflow-wrap:anywhere}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
.chips{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.chip{border-radius:14px;padding:3px 12px;font-weight:600;background:#e3e7ee}
.bad{background:#fbe1e1;color:#8a1111}.good{background:#dff3e4;color:#135f2b}
.warn{background:#fff1cc;color:#6b4e00}.muted{color:#5b6472}
table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e1e4ea;vertical-align:top}
th{font-size:13px;color:#5b6472}td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
tr.fail td{background:#fdf0f0}
.scroll{overflow-x:auto}
section.case{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:14px 16px;
margin:14px 0}
.figure{margin:10px 0}.figure svg{width:100%;height:auto;max-width:1060px;display:block}
.caption{font-size:14px;margin:2px 0 4px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:8px 0}
dt{color:#5b6472}dd{margin:0;overflow-wrap:anywhere}
a{color:#1f5fbf}
"""

_FAILING_FIRST = 0
_OTHER_FAILING = 1
_THE_REST = 2


def _priority(checks: Sequence[CaseResult], decision: Decision | None) -> int:
    if decision is not None and decision.fails_run:
        return _FAILING_FIRST
    return _OTHER_FAILING if is_failing(test_status(checks)) else _THE_REST


def _text(text: str) -> str:
    """``text`` as the page shows it, every text of it: as text, never markup, and its control
    characters but line breaks and tabs escaped visibly (:func:`cells.printable`): an ANSI
    escape or a bell in a test's error reaches no browser."""
    return html.escape(printable(text, lines=True))


def _status_class(status: Status | str) -> str:
    if status in (Status.PASS, "ok", "improved"):
        return "good"
    if status == "new_failure" or (isinstance(status, Status) and is_failing(status)):
        return "bad"
    return "warn" if status in (Status.UNCONFIRMED, Status.INCONCLUSIVE, "flaky") else ""


def _link(path: str | None, page_dir: Path) -> str:
    """A link to ``path`` relative to the page (it moves with the files it is uploaded with),
    named by that relative path: no absolute path of this machine shows on the page."""
    if not path:
        return "-"
    target = Path(path)
    try:
        relative = os.path.relpath(target.resolve(), page_dir)
    except ValueError:  # another drive
        relative = str(target)
    return (
        f'<a href="{_text(quote(Path(relative).as_posix()))}">'
        f"<code>{_text(Path(relative).as_posix())}</code></a>"
    )


def _ratio_text(ratio: float | None) -> str:
    return "-" if ratio is None else format_ratio(ratio)


def _leaf_table(leaves: Sequence[LeafResult]) -> str:
    header = ("output", "shape", "dtype", "rule", "rmse(comp,fp64)", "rmse(eager,fp64)", "ratio")
    rows = []
    for leaf in leaves:
        cells = [
            f"<td><code>{_text(leaf.path)}</code></td>",
            f"<td>{_text('x'.join(map(str, leaf.shape)) or 'scalar')}</td>",
            f"<td>{_text(leaf.dtype)}</td>",
            f"<td>{_text(leaf.rule)}{'' if leaf.passed else ' <b>FAIL</b>'}</td>",
            *(
                f'<td class="num">{"-" if value is None else f"{value:.3e}"}</td>'
                for value in (leaf.rmse_compiled, leaf.rmse_eager)
            ),
            f'<td class="num">{_ratio_text(leaf.ratio)}</td>',
        ]
        row_class = "" if leaf.passed else ' class="fail"'
        rows.append(f"<tr{row_class}>{''.join(cells)}</tr>")
        if leaf.detail and not leaf.passed:
            rows.append(f'<tr><td colspan="7" class="muted">{_text(leaf.detail)}</td></tr>')
    head = "".join(f"<th>{_text(name)}</th>" for name in header)
    return f'<div class="scroll"><table class="errors"><tr>{head}</tr>{"".join(rows)}</table></div>'


# --- the plots ---------------------------------------------------------------------------------

_WIDTH, _HEIGHT = 900, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 14, 40


def _error_text(ratio: float | None) -> str:
    """A point's error in words: an infinite ratio is an exact value that differs."""
    if ratio is not None and math.isinf(ratio):
        return "differs where eager is exact"
    return f"{_ratio_text(ratio)}x eager's error"


def _log_ratio(ratio: float | None) -> float:
    """A ratio on the plot's log scale; an error not measured (allclose to eager) at 1x."""
    if ratio is None or math.isnan(ratio):
        return 0.0
    if math.isinf(ratio):
        return 12.0
    return math.log10(min(max(ratio, 1e-3), 1e12))


def _svg(body: str, label: str) -> str:
    return (
        f'<svg viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" aria-label="{_text(label)}" '
        f'xmlns="http://www.w3.org/2000/svg" font-size="12" font-family="sans-serif">{body}</svg>'
    )


def deviation_caption(points: Sequence[Deviation]) -> str:
    """Where the deviation starts, how it grows, and how much of it later values mask."""
    starts = [index for index, point in enumerate(points) if point.starts]
    failing = sum(not point.passed for point in points)
    if not failing:
        return (
            f"All {len(points)} intermediates are within the rule once the graph returns them: "
            "the deviation arises inside a kernel that fuses them, which returning their values "
            "splits."
        )
    if not starts:
        return f"{failing} of {len(points)} intermediates deviate; no single value where it starts"
    first = starts[0]
    start = points[first]
    after = points[first:]
    worst = max(after, key=lambda point: _log_ratio(point.ratio))
    masked = sum(point.passed for point in after[1:])
    text = (
        f"The deviation starts at intermediate {first + 1} of {len(points)}, "
        f"<code>{_text(start.value)}</code> ({_text(start.op)}, {_error_text(start.ratio)})"
    )
    if len(starts) > 1:
        text += f", and at {len(starts) - 1} more values"
    text += (
        f"; it grows to {_ratio_text(worst.ratio)}x at <code>{_text(worst.value)}</code>"
        if worst is not start
        else ""
    )
    if masked:
        text += f"; {masked} later values are within the rule again (masked)"
    return text + "."


def deviation_svg(points: Sequence[Deviation]) -> str:
    """Each intermediate's ratio to eager's error, in graph order, on a log scale: passing values
    grey, deviating ones red, where the deviation starts marked by a line."""
    count = len(points)
    logs = [_log_ratio(point.ratio) for point in points]
    # A decade of room above the highest point, for the label of where the deviation starts.
    low, high = min(-1.0, math.floor(min(logs))), max(2.0, math.ceil(max(logs)) + 1)
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def x(index: int) -> float:
        return _LEFT + (plot_w * (index + 0.5) / count)

    def y(value: float) -> float:
        return _TOP + plot_h * (high - value) / (high - low)

    parts = [f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="#fafbfc"/>']
    step = max(1, math.ceil((high - low) / 6))
    for decade in range(int(low), int(high) + 1, step):
        parts.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y(decade):.1f}" y2="{y(decade):.1f}" '
            f'stroke="#e3e6eb"/><text x="{_LEFT - 6}" y="{y(decade) + 4:.1f}" '
            f'text-anchor="end">1e{decade}</text>'
        )
    parts.append(
        f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y(0):.1f}" y2="{y(0):.1f}" '
        f'stroke="#5b6472" stroke-dasharray="4 3"/><text x="{_WIDTH - _RIGHT - 4}" '
        f'y="{y(0) - 4:.1f}" text-anchor="end" fill="#5b6472">eager\'s error (1x)</text>'
    )
    line = " ".join(f"{x(index):.1f},{y(value):.1f}" for index, value in enumerate(logs))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#9aa3b0" stroke-width="1"/>')
    radius = 3.5 if count <= 200 else 2
    for index, (point, value) in enumerate(zip(points, logs, strict=True)):
        colour = "#9aa3b0" if point.passed else "#c62828"
        title = f"{point.value} ({point.op}): {_error_text(point.ratio)}"
        parts.append(
            f'<circle class="{"pass" if point.passed else "deviates"}" cx="{x(index):.1f}" '
            f'cy="{y(value):.1f}" r="{radius}" fill="{colour}"><title>{_text(title)}</title>'
            "</circle>"
        )
    for index, point in enumerate(points):
        if point.starts:
            parts.append(
                f'<line class="starts" x1="{x(index):.1f}" x2="{x(index):.1f}" y1="{_TOP}" '
                f'y2="{_TOP + plot_h}" stroke="#c62828" stroke-dasharray="2 2"/>'
                f'<text x="{x(index) + 4:.1f}" y="{_TOP + 12}" fill="#c62828">starts: '
                f"{_text(point.value)} ({_text(point.op)})</text>"
            )
            break
    parts.append(
        f'<text x="{_LEFT + plot_w / 2:.0f}" y="{_HEIGHT - 8}" text-anchor="middle" '
        f'fill="#5b6472">intermediates in graph order (1 to {count})</text>'
        f'<text x="14" y="{_TOP + plot_h / 2:.0f}" text-anchor="middle" fill="#5b6472" '
        f'transform="rotate(-90 14 {_TOP + plot_h / 2:.0f})">rmse ratio to eager</text>'
    )
    return _svg("".join(parts), "deviation along the graph: " + deviation_caption(points))


def trajectory_svg(steps: Sequence[MinifyStep]) -> str:
    """The ops of the smallest failing graph known after each candidate, over the seconds."""
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    most = max(step.ops_left for step in steps)
    span = max(steps[-1].seconds, 1e-3)

    def x(seconds: float) -> float:
        return _LEFT + plot_w * seconds / span

    def y(ops: int) -> float:
        return _TOP + plot_h * (1 - ops / most)

    parts = [f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="#fafbfc"/>']
    for ops in sorted({most, max(most // 2, 1), 0}):
        parts.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y(ops):.1f}" y2="{y(ops):.1f}" '
            f'stroke="#e3e6eb"/><text x="{_LEFT - 6}" y="{y(ops) + 4:.1f}" '
            f'text-anchor="end">{ops}</text>'
        )
    path = [f"M{x(0):.1f},{y(steps[0].ops_left):.1f}"]
    for step in steps:
        path.append(f"H{x(step.seconds):.1f}V{y(step.ops_left):.1f}")
    parts.append(f'<path d="{"".join(path)}" fill="none" stroke="#1f5fbf" stroke-width="2"/>')
    for step in steps:
        parts.append(
            f'<circle class="step" cx="{x(step.seconds):.1f}" cy="{y(step.ops_left):.1f}" r="3" '
            f'fill="#1f5fbf"><title>compile {step.compiles}: {step.ops_left} ops at '
            f"{step.seconds:.1f} s</title></circle>"
        )
    parts.append(
        f'<text x="{_LEFT}" y="{_HEIGHT - 8}" fill="#5b6472">0 s</text>'
        f'<text x="{_WIDTH - _RIGHT}" y="{_HEIGHT - 8}" text-anchor="end" fill="#5b6472">'
        f"{span:.1f} s</text>"
        f'<text x="{_LEFT + plot_w / 2:.0f}" y="{_HEIGHT - 8}" text-anchor="middle" '
        f'fill="#5b6472">seconds of minifying ({len(steps)} candidates judged)</text>'
        f'<text x="14" y="{_TOP + plot_h / 2:.0f}" text-anchor="middle" fill="#5b6472" '
        f'transform="rotate(-90 14 {_TOP + plot_h / 2:.0f})">ops left</text>'
    )
    return _svg(
        "".join(parts), f"minifier trajectory: {steps[0].ops_left} to {steps[-1].ops_left} ops"
    )


# --- the page ----------------------------------------------------------------------------------


def _minify_part(minify: MinifyResult, page_dir: Path) -> str:
    parts = []
    if minify.deviation:
        parts.append(
            '<div class="figure deviation"><h4>Deviation along the graph</h4>'
            f'<p class="caption">{deviation_caption(minify.deviation)}</p>'
            f"{deviation_svg(minify.deviation)}</div>"
        )
    if minify.trajectory:
        parts.append(
            '<div class="figure trajectory"><h4>Minifier trajectory</h4>'
            f'<p class="caption">{_text(format_minify(minify))}</p>'
            f"{trajectory_svg(minify.trajectory)}</div>"
        )
    facts = [
        ("minify", _text(format_minify(minify))),
        ("stage", _text(minify.stage_summary) if minify.stage_summary else ""),
        ("minified", _link(minify.path, page_dir) if minify.path else ""),
        ("kernel", _link(minify.kernel_path, page_dir) if minify.kernel_path else ""),
        ("bug report", _link(minify.bug_report_path, page_dir) if minify.bug_report_path else ""),
        ("note", _text(minify.note)),
    ]
    return "".join(parts) + _facts(facts)


def where_it_starts(minify: MinifyResult | None) -> str:
    """Where in the graph the failure is: the value where the deviation starts, from the locate
    run; a kernel fusing the minimal graph's ops, where every value passes once returned, with
    the stage that shows it; else (an error rather than a deviation, a deviation with no single
    start) the minimal graph's ops; empty before anything was minified."""
    if minify is None:
        return ""
    points = minify.deviation
    start = next((index for index, point in enumerate(points) if point.starts), None)
    if start is not None:
        point = points[start]
        return (
            f"the deviation starts at {point.value} ({point.op}), intermediate {start + 1} of "
            f"{len(points)}"
        )
    if not minify.ops or not minify.path:
        return ""
    ops = ", ".join(minify.ops)
    if points and all(point.passed for point in points):
        where = f"inside a kernel fusing the minimal graph's ops: {ops}"
        return f"{where}; {minify.stage_summary}" if minify.stage_summary else where
    return f"in the minimal graph's ops: {ops}"


def _facts(facts: Sequence[tuple[str, str]]) -> str:
    shown = "".join(f"<dt>{_text(name)}</dt><dd>{value}</dd>" for name, value in facts if value)
    return f"<dl>{shown}</dl>" if shown else ""


def _check_section(
    anchor: str, check: CaseResult, decision: Decision | None, page_dir: Path
) -> str:
    status = str(check.status)
    head = (
        f'<section class="case" id="{anchor}"><h3><span class="chip {_status_class(check.status)}">'
        f"{_text(status)}</span> <code>{_text(check.nodeid)}</code></h3>"
    )
    facts = [
        ("baseline", _text(f"{decision.outcome.label}: {decision.message}") if decision else ""),
        ("message", _text(check.message)),
        ("graph", _text(check.graph) if check.graph else ""),
        ("reference", _text(check.reference) if check.reference != "fp64" else ""),
        ("where", _text(where_it_starts(check.minify))),
        ("worst ratio", _ratio_text(check.worst_ratio) if check.worst_ratio is not None else ""),
        ("repro", _link(check.repro_path, page_dir) if check.repro_path else ""),
        ("unconfirmed", _text(check.unconfirmed or "")),
        ("repro not written", _text(check.repro_unwritten or "")),
    ]
    body = _facts(facts)
    if check.leaves:
        body += "<h4>Error table</h4>" + _leaf_table(check.leaves)
    if check.minify is not None:
        body += _minify_part(check.minify, page_dir)
    return head + body + "</section>"


def _shown(check: CaseResult) -> bool:
    return is_failing(check.status) or check.status is Status.UNCONFIRMED


def html_report(
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    environment: Mapping[str, Any],
    page_dir: Path,
) -> str:
    """The page; links to files are relative to ``page_dir``, the directory it is written to."""
    outcomes = decisions or {}
    tests = sorted(by_test(results), key=lambda item: _priority(item[1], outcomes.get(item[0])))
    chips = _status_chips(tests)
    anchors: dict[int, str] = {}
    sections = [
        _check_section(_anchored(anchors, check), check, outcomes.get(nodeid), page_dir)
        for nodeid, checks in tests
        for check in checks
        if _shown(check)
    ]
    rows = [_test_row(nodeid, checks, outcomes.get(nodeid), anchors) for nodeid, checks in tests]
    cause_items = "".join(_cause_item(cause) for cause in root_causes(results))
    versions = ", ".join(
        f"{name} {environment[name]}" for name in ("torch", "python", "cpu") if name in environment
    )
    baseline_line = _baseline_line(decisions) if decisions is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>compile accuracy: {_text(status_summary(results))}</title>
<style>{_STYLE}</style></head>
<body><main>
<h1>pytest-torchcompile: compile accuracy</h1>
<p id="summary">{_text(status_summary(results))}</p>
<div class="chips" id="statuses">{chips}</div>
{baseline_line}
<h2>Tests</h2>
<div class="scroll"><table id="tests"><tr><th>status</th><th>ratio</th><th>baseline</th>
<th>test</th></tr>{"".join(rows)}</table></div>
<p class="muted">ratio: worst rmse(compiled, fp64) / rmse(eager, fp64) of the outputs.</p>
{f"<h2>Root causes</h2><ul>{cause_items}</ul>" if cause_items else ""}
{f"<h2>Failing checks</h2>{''.join(sections)}" if sections else ""}
<p class="muted">{_text(versions)}</p>
</main></body></html>
"""


def _status_chips(tests: Sequence[tuple[str, list[CaseResult]]]) -> str:
    """A chip per status: how many tests came to it."""
    test_counts = Counter(test_status(checks) for _, checks in tests)
    return "".join(
        f'<span class="chip {_status_class(status)}">{count} {_text(str(status))}</span>'
        for status in Status
        if (count := test_counts.get(status, 0))
    )


def _baseline_line(decisions: Mapping[str, Decision]) -> str:
    """The outcomes against the baseline: counted in a line, and a chip per outcome."""
    counts = outcome_counts(decisions)
    outcome_chips = "".join(
        f'<span class="chip {_status_class(str(outcome))}">{count} {_text(outcome.label)}</span>'
        for outcome in BaselineOutcome
        if (count := counts[str(outcome)])
    )
    return (
        f'<p>Baseline: {_text(baseline_summary(decisions))}</p><div class="chips">'
        f"{outcome_chips}</div>"
    )


def _anchored(anchors: dict[int, str], check: CaseResult) -> str:
    """A new anchor for the section of ``check``, noted in ``anchors`` for its test's row."""
    anchors[id(check)] = anchor = f"check-{len(anchors) + 1}"
    return anchor


def _test_row(
    nodeid: str, checks: Sequence[CaseResult], decision: Decision | None, anchors: dict[int, str]
) -> str:
    """A test's row: status, worst ratio, baseline outcome, its id linked to its first section."""
    status = test_status(checks)
    target = next((anchors[id(check)] for check in checks if id(check) in anchors), None)
    name = f"<code>{_text(nodeid)}</code>"
    shown = f'<a href="#{target}">{name}</a>' if target else name
    ratios = [check.worst_ratio for check in checks if check.worst_ratio is not None]
    return (
        f'<tr class="{"fail" if is_failing(status) else ""}">'
        f'<td><span class="chip {_status_class(status)}">{_text(str(status))}</span></td>'
        f'<td class="num">{_ratio_text(max(ratios) if ratios else None)}</td>'
        f"<td>{_text(decision.outcome.label) if decision else '-'}</td>"
        f"<td>{shown}</td></tr>"
    )


def _cause_item(cause: RootCause) -> str:
    return (
        f"<li>{_text(cause.stage_summary or cause.stage)} (ops "
        f"{_text(', '.join(cause.ops))}, {_text(cause.failure_type)}): "
        f"{len(cause.tests)} test{'s' if len(cause.tests) != 1 else ''}</li>"
    )


def write_html_report(
    path: str | os.PathLike[str],
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    environment: Mapping[str, Any],
) -> None:
    """Write :func:`html_report` to ``path`` atomically."""
    page_dir = Path(path).resolve().parent
    atomic_write(path, html_report(results, decisions, environment, page_dir).encode())
