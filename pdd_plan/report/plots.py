"""Matplotlib figures rendered to PNG bytes (headless Agg backend)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


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
    ax.legend()
    ax.grid(alpha=0.3)
    return _png(fig)
