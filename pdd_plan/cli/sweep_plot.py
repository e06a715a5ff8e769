"""`pdd-plan sweep --plot`: cost against goodput per architecture, the frontier drawn."""

from __future__ import annotations

import io

from pdd_plan import architectures


def sweep_png(result: dict) -> bytes:
    """A PNG: frontier points joined per architecture, the others hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    any_ok = off_front = False
    for j, a in enumerate(result["architectures"]):
        spec = architectures.get(a)
        c, m = spec.color, spec.marker
        rows = {
            p["index"]: p["architectures"][a]
            for p in result["points"]
            if p["architectures"][a]["status"] == "ok"
        }
        if not rows:
            continue
        any_ok = True
        front = set(result["pareto"][a])
        rest = [r for i, r in rows.items() if i not in front]
        if rest:  # off the frontier: hollow
            off_front = True
            ax.scatter(
                [r["goodput_rps"] for r in rest],
                [r["cost_per_hour"] for r in rest],
                facecolors="none",
                edgecolors=c,
                marker=m,
                s=30,
                alpha=0.7,
            )
        on = sorted((rows[i]["goodput_rps"], rows[i]["cost_per_hour"]) for i in front)
        ax.plot(
            [g for g, _ in on],
            [x for _, x in on],
            color=c,
            marker=m,
            ms=7 - j,  # identical plans of two architectures stay visible
            lw=1.5,
            alpha=0.85,
            label=f"{a} (frontier)",
        )
    if off_front:
        ax.scatter([], [], facecolors="none", edgecolors="grey", label="off the frontier")
    if not any_ok:
        ax.text(0.5, 0.5, "no feasible point", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("goodput (requests/s)")
    ax.set_ylabel("cost ($/hour)")
    keys = ", ".join(v["key"] for v in result["vary"])
    ax.set_title(f"{result['scenario']}: sweep over {keys}")
    ax.grid(alpha=0.3)
    if any_ok:
        ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


__all__ = ["sweep_png"]
