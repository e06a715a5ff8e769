"""A regime map as a PNG heatmap: PDD's BCR gain over CDC-PD and over IDC-PD, and its relay
share, one panel each; cells where an architecture has no plan hatched and labelled."""

from __future__ import annotations

import io
import math

import numpy as np

from pdd_plan.architectures import LINE_BASELINE, LOCAL_BASELINE, RELAY_ARCH, get
from pdd_plan.sweep.regimes.cells import GAIN_LINE, GAIN_LOCAL

_HATCH = "///"


def _fmt(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _grid(result: dict, fn) -> list[list]:
    nx = len(result["x"]["values"])
    cells = result["cells"]
    return [
        [fn(c) for c in cells[r * nx : (r + 1) * nx]] for r in range(len(result["y"]["values"]))
    ]


def _ok(cell: dict, arch: str) -> bool:
    return cell["architectures"][arch]["status"] == "ok"


def _gain_text(cell: dict, key: str, base: str) -> str:
    if not _ok(cell, RELAY_ARCH):
        return f"no {get(RELAY_ARCH).title}"
    if not _ok(cell, base):
        return f"{get(RELAY_ARCH).title}\nonly"
    g = round(cell[key] * 100)
    return f"{g:+d}%" if g else "0%"


def _gain_value(cell: dict, key: str, base: str, lim: float) -> float | None:
    """The cell's colour: its gain in %, the top of the scale where only PDD has a plan (the
    baseline cannot serve the cell at all), None (hatched) where PDD has none."""
    if not _ok(cell, RELAY_ARCH):
        return None
    if not _ok(cell, base) or cell[key] is None:
        return lim
    return cell[key] * 100


def _share_text(cell: dict) -> str:
    if not _ok(cell, RELAY_ARCH):
        return "no PDD"
    req = cell["relay_request_share"] or 0.0
    tok = cell["rld_token_share"] or 0.0
    return f"{req * 100:.0f}%\n{tok * 100:.1f}% tok" if req > 0 else "0%"


def _panel(ax, result: dict, values: list[list], texts: list[list], cmap: str, vlim, title: str):

    ny, nx = len(values), len(values[0])
    arr = np.ma.masked_invalid(
        np.array([[math.nan if v is None else v for v in r] for r in values])
    )
    im = ax.imshow(arr, origin="lower", cmap=cmap, vmin=vlim[0], vmax=vlim[1], aspect="auto")
    ax.set_facecolor("#f2f2f2")
    small = nx * ny > 36
    for iy in range(ny):
        for ix in range(nx):
            t = texts[iy][ix]
            v = values[iy][ix]
            if v is None:  # no figure here: hatched, with why (the hatch alone on big maps)
                ax.add_patch(_rect(ix, iy))
                if small:
                    continue
            dark = v is not None and _dark(v, vlim, cmap)
            ax.text(
                ix,
                iy,
                t,
                ha="center",
                va="center",
                fontsize=7 if small else 8,
                color="white" if dark else "black",
            )
    ax.set_xticks(range(nx), [_fmt(v) for v in result["x"]["values"]], fontsize=7)
    ax.set_yticks(range(ny), [_fmt(v) for v in result["y"]["values"]], fontsize=7)
    ax.set_xlabel(result["x"]["label"])
    ax.set_ylabel(result["y"]["label"])
    ax.set_title(title, fontsize=9)
    return im


def _dark(v: float, vlim: tuple[float, float], cmap: str) -> bool:
    """Whether a cell's colour is dark enough to need white text (both ends of RdBu, the top
    of Blues)."""
    t = (v - vlim[0]) / (vlim[1] - vlim[0]) if vlim[1] > vlim[0] else 0.0
    return t > 0.7 or (cmap == "RdBu" and t < 0.3)


def _rect(ix: int, iy: int):
    from matplotlib.patches import Rectangle  # matplotlib: only when a map is drawn

    return Rectangle(
        (ix - 0.5, iy - 0.5), 1, 1, fill=False, hatch=_HATCH, edgecolor="#999999", lw=0
    )


def _gain_limit(result: dict) -> float:
    """The colour scale's half-width in %: the largest gain in the map, at least 5%."""
    keys = (GAIN_LINE, GAIN_LOCAL)
    vals = [abs(c[k]) * 100 for c in result["cells"] for k in keys if c[k] is not None]
    return max(5.0, *vals)


def regime_png(result: dict, dpi: int = 100) -> bytes:
    """The map as PNG bytes (three panels, y upward, each cell labelled with its figure)."""
    import matplotlib  # only when a map is drawn (reading one needs none of it)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is chosen

    lim = _gain_limit(result)

    def gain(key: str, base: str) -> list[list]:
        return _grid(result, lambda c: _gain_value(c, key, base, lim))

    g_line, g_local = gain(GAIN_LINE, LINE_BASELINE), gain(GAIN_LOCAL, LOCAL_BASELINE)
    share = _grid(
        result,
        lambda c: (c["relay_request_share"] or 0.0) * 100 if _ok(c, RELAY_ARCH) else None,
    )
    nx, ny = len(result["x"]["values"]), len(result["y"]["values"])
    w = max(3.6, 0.62 * nx + 1.4)
    fig, axes = plt.subplots(1, 3, figsize=(3 * w, max(3.2, 0.5 * ny + 1.6)))
    pdd, cdc, idc = (get(a).title for a in (RELAY_ARCH, LINE_BASELINE, LOCAL_BASELINE))
    panels = [
        (
            g_line,
            _grid(result, lambda c: _gain_text(c, GAIN_LINE, LINE_BASELINE)),
            "RdBu",
            (-lim, lim),
            f"{pdd} BCR gain over {cdc} (%)",
        ),
        (
            g_local,
            _grid(result, lambda c: _gain_text(c, GAIN_LOCAL, LOCAL_BASELINE)),
            "RdBu",
            (-lim, lim),
            f"{pdd} BCR gain over {idc} (%)",
        ),
        (
            share,
            _grid(result, _share_text),
            "Blues",
            (0.0, max([10.0, *(v for r in share for v in r if v is not None)])),
            f"{pdd} relay share (% of requests via RLD;\n% of output tokens from RLD)",
        ),
    ]
    for ax, (vals, texts, cmap, vlim, title) in zip(axes, panels):
        im = _panel(ax, result, vals, texts, cmap, vlim, title)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
    how = "verified in the simulator" if result["verify"] else "analytic, not replayed"
    fig.suptitle(
        f"{result['scenario']}: where {pdd} pays ({how}). Hatched: {pdd} has no plan; "
        f"'{pdd} only': the baseline has none (drawn at the top of the scale)",
        fontsize=10,
    )
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


__all__ = ["regime_png"]
