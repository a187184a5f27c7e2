"""Small helpers shared by the domains: charts as inline SVG, Parquet schemas as
``dg.TableSchema``, and reading an upstream asset's metadata for the same partition."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Sequence

import dagster as dg


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


def parquet_schema(path: str | Path) -> dg.TableSchema:
    """The column schema of a Parquet file (read from its footer only)."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    return dg.TableSchema(columns=[dg.TableColumn(name=f.name, type=str(f.type)) for f in schema])


def upstream_metadata(context: Any, asset: str, partition_key: str) -> dict[str, Any]:
    """Plain-valued metadata of ``asset``'s latest materialization for ``partition_key``."""
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition_key]), limit=1).records
    if not records:
        raise dg.Failure(f"{asset} has no materialization for partition {partition_key!r}; materialize it first")
    meta = records[0].asset_materialization.metadata
    return {k: getattr(v, "value", v) for k, v in meta.items()}
