"""Matplotlib figures rendered to PNG bytes (headless Agg backend)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np

from pdd_plan import architectures  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def bathtub_png(res: dict) -> bytes:
    pts = res["points"]
    x = [p["hit_rate"] * 100 for p in pts]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(x, [p["miss_tokens_per_s"] for p in pts], label="uncached tokens/s")
    ax.plot(
        x,
        [p["revenue_per_s"] for p in pts],
        label=f"revenue/s (cached at x{res['hit_price_ratio']:g})",
        lw=2,
    )
    v = res["valley"]
    ax.axvline(
        v["hit_rate"] * 100,
        color="grey",
        ls=":",
        label=f"valley {v['hit_rate'] * 100:.0f}%, -{v['revenue_drop'] * 100:.1f}%",
    )
    ax.set_xlabel("prefix hit rate (%)")
    ax.set_ylabel("tokens/s per instance")
    ax.set_title(f"{res['model']} on {res['instance']}, {res['input_tokens']:,}-token inputs")
    _legend_outside(ax)
    ax.grid(alpha=0.3)
    return _png(fig)


# ---------------------------------------------------------------------- report figures

PART_COLORS = {
    "prefill": "#4c72b0",
    "relay_decode": "#dd8452",
    "main_decode": "#55a868",
    "decode": "#8172b3",
    "line": "#937860",
}


def _color(a: str, i: int) -> str:
    spec = architectures.REGISTRY.get(a)
    return spec.color if spec is not None else f"C{i}"


# one marker shape and size per architecture, largest first: where two plans are the same fleet
# (PDD without relay traffic is CDC-PD) the later, smaller marker sits inside the earlier one
MARKERS = (("o", 9), ("s", 6), ("^", 5), ("D", 4), ("v", 4))


def _marker(i: int) -> tuple[str, int]:
    return MARKERS[i % len(MARKERS)]


def _legend_outside(ax, **kw) -> None:
    """The legend right of the axes, clear of the data (the saved figure grows to hold it)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8, **kw)


def ttft_cdf_png(series: dict, analytic: dict, sla: dict, note: str) -> bytes:
    """Empirical CDF of simulated TTFT per architecture; analytic P50/P90/P99 as markers."""

    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = ("-", "--", ":", "-.")
    widths = (3.2, 1.8, 1.8, 1.8)
    for i, (a, x) in enumerate(series.items()):
        x = np.sort(np.asarray(x, dtype=float))
        x = x[~np.isnan(x)]
        if x.size == 0:
            continue
        y = np.arange(1, x.size + 1) / x.size
        mk, size = _marker(i)
        ax.step(
            x,
            y,
            where="post",
            color=_color(a, i),
            ls=styles[i % len(styles)],
            label=f"{a} (simulated)",
            lw=widths[i % len(widths)],
            alpha=0.75 if i == 0 else 1.0,
        )
        q = analytic.get(a) or {}
        pts = [(q.get(k), p) for k, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))]
        pts = [(v, p) for v, p in pts if v is not None]
        if pts:
            ax.plot(
                [v for v, _ in pts],  # type: ignore[arg-type]
                [p for _, p in pts],
                mk,
                ms=size,
                mfc="none",
                mew=1.5,
                color=_color(a, i),
                label=f"{a} analytic P50/P90/P99",
            )
    for key, lab in (("ttft_p90_s", "SLA P90"), ("ttft_p99_s", "SLA P99")):
        if sla.get(key):
            ax.axvline(sla[key], color="grey", ls=":" if key.endswith("p90_s") else "--", lw=1)
            ax.text(sla[key], 0.5, f" {lab}", color="grey", fontsize=9, rotation=90, va="center")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.0)
    ax.set_xlabel("time to first token (s, log scale)")
    ax.set_ylabel("share of requests")
    ax.set_title("TTFT CDF per architecture")
    ax.grid(alpha=0.3, which="both")
    _legend_outside(ax)
    fig.text(0.01, -0.02, note, fontsize=8, color="dimgray")
    return _png(fig)


def hit_hist_png(hits, source: str) -> bytes:

    h = np.asarray(hits, dtype=float)
    h = h[~np.isnan(h)]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    bins = np.linspace(0.0, 1.0, 21)
    w = np.full(h.size, 100.0 / max(h.size, 1))
    ax.hist(h * 100, bins=bins * 100, weights=w, color="#4c72b0", edgecolor="white")  # type: ignore[arg-type]
    ax.set_xlabel("prefix hit rate, prefill side (%)")
    ax.set_ylabel("share of requests (%)")
    mean = float(h.mean()) * 100 if h.size else 0.0
    ax.set_title(f"Prefix-hit histogram ({h.size:,} requests, mean {mean:.1f}%)")
    ax.grid(alpha=0.3, axis="y")
    fig.text(0.01, -0.02, source, fontsize=7, color="dimgray")
    return _png(fig)


def cost_png(breakdown: dict) -> bytes:
    """Stacked $/h per architecture: one segment per role and the line."""

    archs = list(breakdown)
    parts = [p for p in PART_COLORS if any(p in breakdown[a] for a in archs)]
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = np.zeros(len(archs))
    for p in parts:
        v = np.array([breakdown[a].get(p, 0.0) for a in archs])
        ax.bar(archs, v, bottom=bottom, color=PART_COLORS[p], label=p, width=0.6)
        bottom += v
    for i, t in enumerate(bottom):
        ax.text(i, t, f"${t:,.0f}/h", ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("cost ($/h)")
    ax.set_title("Cost breakdown per architecture")
    ax.set_ylim(0, max(bottom.max() * 1.15, 1.0) if len(bottom) else 1.0)
    ax.grid(alpha=0.3, axis="y")
    _legend_outside(ax)
    return _png(fig)


def line_util_png(util: dict, sim_label: str) -> bytes:
    """Grouped bars per architecture: analytic vs simulated line utilization (None: no line)."""

    archs = list(util)
    x = np.arange(len(archs))
    fig, ax = plt.subplots(figsize=(7, 4))
    an = [util[a][0] for a in archs]
    si = [util[a][1] for a in archs]
    ax.bar(x - 0.18, [100 * (v or 0) for v in an], 0.36, label="analytic", color="#4c72b0")
    ax.bar(x + 0.18, [100 * (v or 0) for v in si], 0.36, label=sim_label, color="#dd8452")
    for i, (a_, s_) in enumerate(zip(an, si)):
        if a_ is None and s_ is None:
            ax.text(i, 2, "no line\n(RDMA in one DC)", ha="center", fontsize=8, color="dimgray")
        for dx, v in ((-0.18, a_), (0.18, s_)):
            if v is not None:
                ax.text(i + dx, 100 * v, f"{100 * v:.0f}%", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, archs)
    ax.set_ylim(0, 110)
    ax.set_ylabel("line utilization (%)")
    ax.set_title("Line utilization per architecture")
    ax.grid(alpha=0.3, axis="y")
    _legend_outside(ax)
    return _png(fig)


def ttft_percentiles_png(rows: dict, sla: dict) -> bytes:
    """Grouped bars: analytic and simulated TTFT P50/P90/P99 per architecture."""

    archs = list(rows)
    qs = ("p50", "p90", "p99")
    fig, axes = plt.subplots(1, len(qs), figsize=(9, 3.6), sharey=False)
    for ax, q in zip(np.atleast_1d(axes), qs):
        x = np.arange(len(archs))
        an = [(rows[a][0] or {}).get(q) for a in archs]
        si = [(rows[a][1] or {}).get(q) for a in archs]
        ax.bar(x - 0.18, [v or 0 for v in an], 0.36, color="#4c72b0", label="analytic")
        ax.bar(x + 0.18, [v or 0 for v in si], 0.36, color="#dd8452", label="simulated")
        target = {"p90": sla.get("ttft_p90_s"), "p99": sla.get("ttft_p99_s")}.get(q)
        if target:
            ax.axhline(target, color="grey", ls="--", lw=1)
        ax.set_xticks(x, archs, fontsize=8)
        ax.set_title(f"TTFT {q.upper()}")
        ax.grid(alpha=0.3, axis="y")
    np.atleast_1d(axes)[0].set_ylabel("seconds")
    _legend_outside(np.atleast_1d(axes)[-1])
    fig.suptitle("TTFT percentiles: analytic vs simulated (dashed: SLA)")
    fig.tight_layout()
    return _png(fig)


def day_png(series: dict, title: str) -> bytes:
    """Instances per role over the day, stacked, one panel per architecture. `series`:
    architecture -> (period start hours, period hours, {role: instances per period})."""
    n = len(series)
    fig, axes = plt.subplots(n, 1, figsize=(8, 2.4 * n + 0.6), sharex=True, squeeze=False)
    for ax, (a, (starts, hours, roles)) in zip(axes[:, 0], series.items()):
        # a step per period: each period's instances held over its hours
        x = np.ravel([[s, s + h] for s, h in zip(starts, hours)])
        ys = [np.repeat(np.asarray(v, float), 2) for v in roles.values()]
        colors = [PART_COLORS.get(r, "#999999") for r in roles]
        ax.stackplot(x, *ys, labels=list(roles), colors=colors, alpha=0.85)
        ax.set_ylabel("instances")
        ax.set_title(architectures.get(a).title, fontsize=10)
        ax.grid(alpha=0.3)
        _legend_outside(ax)
    axes[-1, 0].set_xlabel(title)
    axes[-1, 0].set_xticks(range(0, 25, 3))
    return _png(fig)
