"""Small helpers shared by the domains: charts as inline SVG, Parquet schemas as
``dg.TableSchema``, the upstream materialization a step builds on, and the gates (blocking
checks) that decide whether a downstream builds at all."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import dagster as dg


OWNERS = ["team:extrarlhf"]
# For transient trouble only (a worker killed, a full disk freed): every asset's write is
# atomic or resumable, so a retry never sees half a result. Definite errors raise
# ``dg.Failure(..., allow_retries=False)``.
TRANSIENT_RETRY = dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL)


def _img(svg: str, alt: str) -> str:
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f"![{alt}](data:image/svg+xml;base64,{data})"


def bar_chart_md(title: str, bars: Sequence[tuple[str, float, str]]) -> str:
    """Horizontal bars (label, value, colour) as an inline SVG image plus a markdown table."""
    width, row, left = 420, 26, 110
    top = max((v for _, v, _ in bars), default=0) or 1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{row * len(bars) + 34}" '
             f'font-family="sans-serif" font-size="13">',
             f'<text x="4" y="16" font-weight="bold">{title}</text>']
    for i, (label, value, colour) in enumerate(bars):
        y = 26 + i * row
        w = (width - left - 60) * value / top
        parts.append(f'<text x="4" y="{y + 15}">{label}</text>'
                     f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="16" fill="{colour}"/>'
                     f'<text x="{left + w + 6:.1f}" y="{y + 15}">{value:g}</text>')
    parts.append("</svg>")
    table = "| | " + " | ".join(b[0] for b in bars) + " |\n|---|" + "---:|" * len(bars) + "\n| count | " + \
        " | ".join(f"{b[1]:g}" for b in bars) + " |"
    return _img("".join(parts), title) + "\n\n" + table + "\n"


def line_chart_md(title: str, series: dict[str, Sequence[float | None]]) -> str:
    """Per-epoch curves as an inline SVG image plus the numbers as a markdown table."""
    width, height, pad = 420, 200, 36
    colours = ["#2563eb", "#dc2626", "#16a34a", "#9333ea"]
    values = [v for ys in series.values() for v in ys if v is not None]
    n = max((len(ys) for ys in series.values()), default=0)
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    hi = hi if hi > lo else lo + 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><text x="4" y="14" font-weight="bold">{title}</text>',
             f'<line x1="{pad}" y1="{height - pad}" x2="{width - 8}" y2="{height - pad}" stroke="#888"/>',
             f'<line x1="{pad}" y1="22" x2="{pad}" y2="{height - pad}" stroke="#888"/>',
             f'<text x="2" y="30">{hi:.3g}</text><text x="2" y="{height - pad}">{lo:.3g}</text>',
             f'<text x="{width // 2}" y="{height - 8}">epoch</text>']
    for k, (name, ys) in enumerate(series.items()):
        pts = [(i, y) for i, y in enumerate(ys) if y is not None]
        colour = colours[k % len(colours)]
        xy = [(pad + (width - pad - 16) * (i / max(n - 1, 1)), 22 + (height - pad - 22) * (1 - (y - lo) / (hi - lo)))
              for i, y in pts]
        if len(xy) > 1:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                         + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + '"/>')
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in xy]
        parts.append(f'<text x="{width - 130}" y="{30 + 14 * k}" fill="{colour}">{name}</text>')
    parts.append("</svg>")
    header = "| epoch | " + " | ".join(series) + " |\n|---:|" + "---:|" * len(series) + "\n"
    rows = "".join(f"| {i + 1} | " + " | ".join("-" if i >= len(ys) or ys[i] is None else f"{ys[i]:.4f}"
                                                 for ys in series.values()) + " |\n" for i in range(n))
    return _img("".join(parts), title) + "\n\n" + header + rows


def interval_chart_md(title: str, labels: Sequence[str],
                      series: dict[str, Sequence[tuple[float, float, float] | None]], *, axis: str = "Elo") -> str:
    """Points with error bars, one column per label (``(value, low, high)`` per series, None:
    no point), a dashed zero line, as an inline SVG image plus the numbers as a markdown table."""
    width, height, pad, top, legend = 600, 240, 44, 24, 130
    colours = ["#2563eb", "#dc2626", "#16a34a", "#9333ea"]
    values = [v for pts in series.values() for p in pts if p is not None for v in p] + [0.0]
    lo, hi = min(values), max(values)
    hi = hi if hi > lo else lo + 1.0
    span = hi - lo
    lo, hi = lo - 0.05 * span, hi + 0.05 * span
    n = max(len(labels), 1)
    right = width - legend  # the legend sits right of the plot
    step = (right - pad - 8) / n

    def y(v: float) -> float:
        return top + (height - pad - top) * (1 - (v - lo) / (hi - lo))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><text x="4" y="14" font-weight="bold">{title}</text>',
             f'<line x1="{pad}" y1="{height - pad}" x2="{right}" y2="{height - pad}" stroke="#888"/>',
             f'<line x1="{pad}" y1="{top}" x2="{pad}" y2="{height - pad}" stroke="#888"/>',
             f'<line x1="{pad}" y1="{y(0):.1f}" x2="{right}" y2="{y(0):.1f}" stroke="#bbb" stroke-dasharray="4 3"/>',
             f'<text x="2" y="{top + 6}">{hi:+.0f}</text><text x="2" y="{height - pad}">{lo:+.0f}</text>',
             f'<text x="2" y="{y(0) + 4:.1f}">0</text>']
    for i, label in enumerate(labels):
        parts.append(f'<text x="{pad + step * (i + 0.5):.1f}" y="{height - pad + 16}" text-anchor="middle">'
                     f'{label}</text>')
    k_all = max(len(series), 1)
    for k, (name, pts) in enumerate(series.items()):
        colour = colours[k % len(colours)]
        for i, p in enumerate(pts):
            if p is None:
                continue
            x = pad + step * (i + (k + 1) / (k_all + 1))
            value, low, high = p
            parts.append(f'<line x1="{x:.1f}" y1="{y(low):.1f}" x2="{x:.1f}" y2="{y(high):.1f}" stroke="{colour}" '
                         f'stroke-width="2"/><line x1="{x - 4:.1f}" y1="{y(low):.1f}" x2="{x + 4:.1f}" '
                         f'y2="{y(low):.1f}" stroke="{colour}"/><line x1="{x - 4:.1f}" y1="{y(high):.1f}" '
                         f'x2="{x + 4:.1f}" y2="{y(high):.1f}" stroke="{colour}"/>'
                         f'<circle cx="{x:.1f}" cy="{y(value):.1f}" r="3.5" fill="{colour}"/>')
        parts.append(f'<text x="{right + 10}" y="{30 + 14 * k}" fill="{colour}">{name}</text>')
    parts.append(f'<text x="{(pad + right) // 2}" y="{height - 8}" text-anchor="middle">{axis} (95% interval)</text></svg>')
    header = "| | " + " | ".join(series) + " |\n|---|" + "---|" * len(series) + "\n"

    def cell(pts: Sequence[tuple[float, float, float] | None], i: int) -> str:
        p = pts[i] if i < len(pts) else None
        return "-" if p is None else f"{p[0]:+.0f} [{p[1]:+.0f}, {p[2]:+.0f}]"

    rows = "".join(f"| {label} | " + " | ".join(cell(pts, i) for pts in series.values()) + " |\n"
                   for i, label in enumerate(labels))
    return _img("".join(parts), title) + "\n\n" + header + rows


def parquet_schema(path: str | Path) -> dg.TableSchema:
    """The column schema of a Parquet file (read from its footer only)."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    return dg.TableSchema(columns=[dg.TableColumn(name=f.name, type=str(f.type)) for f in schema])


def table_schema(dataset_path: str | Path, table: str) -> dg.TableSchema:
    """The column schema of one table of a dataset version, with each column's description,
    as its manifest records them (the manifest is checked against the files on validation)."""
    from extrarlhf.datasets.manifest import read_manifest

    columns = read_manifest(Path(dataset_path))["tables"][table]["columns"]
    return dg.TableSchema(columns=[
        dg.TableColumn(name=c["name"], type=c["type"], description=c.get("description"),
                       constraints=dg.TableColumnConstraints(nullable=bool(c.get("nullable", True))))
        for c in columns])


def column_lineage(schema: dg.TableSchema, upstream_asset: str,
                   upstream_columns: set[str]) -> dg.TableColumnLineage:
    """Column lineage by name: each column of ``schema`` that ``upstream_asset`` also has
    comes from that column."""
    key = dg.AssetKey(upstream_asset)
    return dg.TableColumnLineage(deps_by_column={
        c.name: [dg.TableColumnDep(asset_key=key, column_name=c.name)]
        for c in schema.columns if c.name in upstream_columns})


@dataclass(frozen=True)
class Upstream:
    """One materialization a step builds on: its plain-valued metadata and where it comes from."""

    asset: str
    metadata: dict[str, Any]
    run_id: str
    timestamp: float
    partition: str | None

    def provenance(self) -> dict[str, Any]:
        """Metadata a downstream records so the UI shows exactly which upstream it read."""
        return {f"{self.asset}_run_id": self.run_id}


def _plain(meta: Any) -> dict[str, Any]:
    return {k: getattr(v, "value", v) for k, v in meta.items()}


def materialized_in_run(context: Any, asset: str, partition_key: str | None = None) -> Upstream | None:
    """The latest materialization of ``asset`` (of ``partition_key`` if given) made by this run
    (``None`` also for a context without a run, e.g. a sensor's)."""
    key = dg.AssetKey(asset)
    run = getattr(context, "run", None)
    if run is None:
        return None
    for record in reversed(context.instance.get_records_for_run(
            run_id=run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records):
        mat = record.event_log_entry.asset_materialization
        if mat is not None and mat.asset_key == key and (partition_key is None or mat.partition == partition_key):
            return Upstream(asset, _plain(mat.metadata), record.run_id, record.timestamp, mat.partition)
    return None


def upstream(context: Any, asset: str, partition_key: str) -> Upstream:
    """The materialization of ``asset`` this step builds on: the one made by this run when the
    run materialized it (so a concurrent run of the same partition never swaps it under this
    one), else the latest one of ``partition_key``. Fails clearly when there is none."""
    found = materialized_in_run(context, asset, partition_key)
    if found is not None:
        return found
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition_key]), limit=1).records
    if not records:
        raise dg.Failure(f"{asset} has no materialization for partition {partition_key!r}; materialize it first",
                         allow_retries=False)
    mat = records[0].asset_materialization
    return Upstream(asset, _plain(mat.metadata), records[0].run_id, records[0].timestamp, mat.partition)


def upstream_metadata(context: Any, asset: str, partition_key: str) -> dict[str, Any]:
    """Plain-valued metadata of the materialization of ``asset`` this step builds on (see :func:`upstream`)."""
    return upstream(context, asset, partition_key).metadata


def gate_blockers(context: Any, source: Upstream, checks: Sequence[dg.AssetCheckSpec]) -> list[str]:
    """Why the blocking ones of ``checks`` (the specs of ``source.asset``'s checks) forbid
    building on that materialization (empty: every blocking check evaluated it and passed).

    Dagster itself stops a downstream step only for a failed ERROR check; a WARN one (a
    readiness "not yet", an inconclusive benchmark: normal outcomes, not errors) lets the run
    go on, so each gated asset asks here and skips with these reasons. Across runs the
    automation conditions (``all_deps_blocking_checks_passed``) hold the same gates."""
    from dagster._core.event_api import PartitionKeyFilter

    blocking = [spec.key for spec in checks if spec.blocking]
    latest = context.instance.event_log_storage.get_latest_asset_check_execution_by_key(
        blocking, partition_filter=PartitionKeyFilter(key=source.partition))
    reasons = []
    for check_key in blocking:
        record = latest.get(check_key)
        evaluation = record.event.dagster_event.event_specific_data if record and record.event else None
        target = getattr(evaluation, "target_materialization_data", None)
        # (run, time) name a materialization across storages; storage ids differ between
        # SQLite's per-run and index databases
        if evaluation is None or not hasattr(evaluation, "passed") or (
                target is not None and (target.run_id, target.timestamp) != (source.run_id, source.timestamp)):
            reasons.append(f"{check_key.name} has not evaluated this {source.asset} materialization "
                           f"(run {source.run_id[:8]}); materialize {source.asset} again")
        elif not evaluation.passed:
            detail = _plain(evaluation.metadata)
            why = detail.get("blockers") or detail.get("failures") or detail.get("verdict") or "failed"
            reasons.append(f"{check_key.name} {GATE_HELD} {one_line(str(why))}")
    return reasons


GATE_HELD = "did not pass:"  # the words after a check's name in a gate reason (run_main matches them)


def one_line(text: str) -> str:
    """A markdown bullet list (as the checks' metadata holds it) as one line: ``a; b``."""
    return "; ".join(line.strip().lstrip("-").strip() for line in text.strip().splitlines() if line.strip())


def skipped(context: Any, reasons: list[str]) -> dg.AssetObservation:
    """The record of a normal "not built" outcome: logged, and an observation on the asset
    (its page shows why) -- never a failure, never a materialization."""
    text = "; ".join(reasons)
    context.log.info(f"{context.asset_key.to_user_string()} not built: {text}")
    return dg.AssetObservation(
        asset_key=context.asset_key, partition=context.partition_key if context.has_partition_key else None,
        metadata={"skipped": dg.MetadataValue.md("\n".join(f"- {r}" for r in reasons)),
                  "skipped_reasons": dg.MetadataValue.json(list(reasons))})
