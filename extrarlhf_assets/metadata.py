"""Small helpers shared by the domains: charts as inline SVG, Parquet schemas as
``dg.TableSchema``, the upstream materialization a step builds on, and the gates (blocking
checks) that decide whether a downstream builds at all."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence
from xml.sax.saxutils import escape

import dagster as dg


OWNERS = ["team:extrarlhf"]
# For transient trouble only (a worker killed, a full disk freed): every asset's write is
# atomic or resumable, so a retry never sees half a result. Definite errors raise
# ``dg.Failure(..., allow_retries=False)``.
TRANSIENT_RETRY = dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL)


# Dagster 1.13's UI shows a markdown value in place (the asset's Overview, its events) only while
# it is shorter than this many characters, else behind "[Show Markdown]" (ui-core MetadataEntry.tsx;
# checked in Chromium, tests/extrarlhf_assets/test_dagster_ui.py). Every chart is built to fit.
INLINE_MD_LIMIT = 1000
_SVG_OPEN = ("<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' "
             "font-size='11'><text x='2' y='12' font-weight='bold'>{title}</text>")  # title: escaped text
_COLOURS = ("#25e", "#d22", "#1a4", "#93e")  # short hex: every character counts


def _svg_md(svg: str, alt: str) -> str:
    """An SVG as a markdown image: a data URI in an angle-bracket destination, where spaces need
    no escape and ``<``/``>`` only a backslash (shorter than base64 or percent-encoding)."""
    alt = alt.replace("[", "(").replace("]", ")")
    uri = (svg.replace("%", "%25").replace("#", "%23").replace("&", "%26")  # '&': markdown would decode entities
           .replace("\\", "%5C").replace("<", "\\<").replace(">", "\\>"))
    return f"![{alt}](<data:image/svg+xml,{uri}>)"


def _fit(render: Callable[[int], str], n: int) -> str:
    """``render(k)`` for the largest ``1 <= k <= n`` whose markdown fits inline (else ``render(1)``,
    which the UI then shows behind its link: a chart never fails an asset)."""
    md = ""
    for k in range(max(n, 1), 0, -1):
        md = render(k)
        if len(md) < INLINE_MD_LIMIT:
            break
    return md


def _n(v: float) -> str:
    return f"{v:.3g}"


def bar_chart_md(title: str, bars: Sequence[tuple[str, float, str]]) -> str:
    """Horizontal bars (label, value, colour), each value written beside its bar, as an inline
    SVG image short enough for the UI to show in place (a handful of bars: four take ~800 characters)."""
    width, row, left = 360, 20, 84
    top = max((v for _, v, _ in bars), default=0) or 1
    parts = [_SVG_OPEN.format(w=width, h=row * len(bars) + 24, title=escape(title))]
    for i, (label, value, colour) in enumerate(bars):
        y = 18 + i * row
        w = round((width - left - 56) * value / top)
        parts.append(f"<text x='2' y='{y + 13}'>{escape(label)}</text><rect x='{left}' y='{y + 2}' width='{w}' "
                     f"height='14' fill='{colour}'/><text x='{left + w + 4}' y='{y + 13}'>{value:g}</text>")
    return _svg_md("".join(parts) + "</svg>", title)


def line_chart_md(title: str, series: dict[str, Sequence[float | None]]) -> str:
    """Per-epoch curves as an inline SVG image short enough for the UI to show in place (a long
    run is drawn on an even sample of its epochs, the first and last included); the numbers of
    every epoch belong in a table beside it (:func:`records_table`)."""
    width, height, pad, top, bottom, legend = 360, 150, 40, 18, 18, 96
    n = max((len(ys) for ys in series.values()), default=0)
    values = [v for ys in series.values() for v in ys if v is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    hi = hi if hi > lo else lo + 1.0
    right = width - legend  # the legend sits right of the plot

    def render(k: int) -> str:
        epochs = sorted({round(j * (n - 1) / max(k - 1, 1)) for j in range(k)}) if n else []
        texts = [f"<text x='2' y='{top + 10}'>{_n(hi)}</text><text x='2' y='{height - bottom}'>{_n(lo)}</text>"
                 f"<text x='{(pad + right) // 2}' y='{height - 4}' text-anchor='middle'>epoch 1-{n}</text>"]
        paths = [f"<path d='M{pad} {top}V{height - bottom}H{right}' stroke='gray' stroke-width='1'/>"]
        for s, (name, ys) in enumerate(series.items()):
            colour = _COLOURS[s % len(_COLOURS)]
            pts = [(pad + 4 + (right - pad - 8) * i / max(n - 1, 1),
                    top + (height - bottom - top) * (1 - (ys[i] - lo) / (hi - lo)))
                   for i in epochs if i < len(ys) and ys[i] is not None]
            texts.append(f"<text x='{right + 6}' y='{top + 10 + 13 * s}' fill='{colour}'>{escape(name)}</text>")
            if pts:
                paths.append(f"<path d='M" + " ".join(f"{x:.0f} {y:.0f}" for x, y in pts) + f"' stroke='{colour}'/>"
                             f"<path d='" + "".join(f"M{x:.0f} {y:.0f}h0" for x, y in pts) +
                             f"' stroke='{colour}' stroke-width='5'/>")
        return _svg_md(_SVG_OPEN.format(w=width, h=height, title=escape(title)) + "".join(texts) +
                       "<g fill='none' stroke-width='2' stroke-linecap='round'>" + "".join(paths) + "</g></svg>",
                       title)
    return _fit(render, n)


def interval_chart_md(title: str, labels: Sequence[str],
                      series: dict[str, Sequence[tuple[float, float, float] | None]]) -> str:
    """Points with error bars, one column per label (``(value, low, high)`` per series, None: no
    point) and a dashed zero line, as an inline SVG image short enough for the UI to show in
    place: when not every label fits, the latest ones (the title then says how many of how
    many). Labels are short (a rung number): names and figures belong in a table beside it."""
    width, height, pad, top = 360, 160, 34, 18
    legend = 96 if len(series) > 1 else 8

    def render(k: int) -> str:
        shown = list(range(len(labels)))[-k:]
        pts = {name: [p[i] if i < len(p) else None for i in shown] for name, p in series.items()}
        values = [v for ps in pts.values() for p in ps if p is not None for v in p] + [0.0]
        lo, hi = min(values), max(values)
        hi = hi if hi > lo else lo + 1.0
        lo, hi = lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)
        right, base = width - legend, height - 18
        step = (right - pad) / max(len(shown), 1)

        def y(v: float) -> int:
            return round(top + (base - top) * (1 - (v - lo) / (hi - lo)))

        # every label character in one <text>, each at its own x (a chunk per character, centred)
        xs = [round(pad + step * (j + 0.5) + 6 * (c - (len(labels[i]) - 1) / 2))
              for j, i in enumerate(shown) for c in range(len(labels[i]))]
        head = title if len(shown) == len(labels) else f"{title}, last {len(shown)} of {len(labels)}"
        zero = y(0)  # its label only where it does not overlap the top or bottom one
        texts = [f"<text x='2' y='{top + 8}'>{hi:+.0f}</text><text x='2' y='{base}'>{lo:+.0f}</text>"
                 + (f"<text x='2' y='{zero + 4}'>0</text>" if top + 12 < zero < base - 12 else "")
                 + f"<text y='{base + 14}' text-anchor='middle' x='{' '.join(map(str, xs))}'>"
                 + escape("".join(labels[i] for i in shown)) + "</text>"]
        paths = [f"<path d='M{pad} {top}V{base}H{right}' stroke='gray' stroke-width='1'/>"
                 f"<path d='M{pad} {zero}H{right}' stroke='gray' stroke-width='1' stroke-dasharray='4 3'/>"]
        for s, (name, ps) in enumerate(pts.items()):
            colour = _COLOURS[s % len(_COLOURS)]
            if len(pts) > 1:
                texts.append(f"<text x='{right + 6}' y='{top + 10 + 13 * s}' fill='{colour}'>{escape(name)}</text>")
            drawn = [(round(pad + step * (j + (s + 1) / (len(pts) + 1))), p) for j, p in enumerate(ps) if p is not None]
            if drawn:
                paths.append("<path d='" + "".join(f"M{x} {y(p[1])}V{y(p[2])}" for x, p in drawn) +
                             f"' stroke='{colour}'/><path d='" + "".join(f"M{x} {y(p[0])}h0" for x, p in drawn)
                             + f"' stroke='{colour}' stroke-width='7'/>")
        return _svg_md(_SVG_OPEN.format(w=width, h=height, title=escape(head)) + "".join(texts) +
                       "<g fill='none' stroke-width='2' stroke-linecap='round'>" + "".join(paths) + "</g></svg>", head)
    return _fit(render, len(labels))


def records_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> dg.MetadataValue:
    """Rows as a ``MetadataValue.table`` (``columns``: name and type): the UI always shows it in
    place, so the numbers of a chart stay one glance away."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord({name: row.get(name) for name, _ in columns}) for row in rows],
        schema=dg.TableSchema(columns=[dg.TableColumn(name=name, type=kind) for name, kind in columns]))


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
