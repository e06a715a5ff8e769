"""A plan as a picture (inline SVG, no script): each datacenter a box holding its pools (role,
GPU, instances x GPUs, $/h), the leased line between datacenters (count x capacity, use), RDMA
inside a datacenter, and an arrow per request path (``p_md``, ``p_rld_md``, ``p_rld``) with its
share of requests, all read from the plan. A path no request takes is drawn dashed and grey.

Deterministic: the same plan gives the same bytes (no ids from counters or clocks)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from pdd_plan.architectures import P_MD, P_RLD, P_RLD_MD, ROLE_ORDER, get
from pdd_plan.outputs.plan import ArchitecturePlan

W = 720  # the drawing's width in its own units (the page scales it)
DC_W, POOL_W, POOL_H, GAP = 270, 230, 62, 44
TOP = 40  # below the title
PAD = 34  # a datacenter box's label band


@dataclass(frozen=True)
class _Box:
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


def _t(x: float, y: float, text: str, size: int = 13, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.0f}" y="{y:.0f}" font-size="{size}"{extra}>{escape(text)}</text>'


def _datacenters(p: ArchitecturePlan) -> dict[str, list]:
    """{datacenter: its instance groups in role order}, the prefill's datacenter first."""
    groups = sorted(p.instances, key=lambda g: ROLE_ORDER.get(g.role, 9))
    out: dict[str, list] = {}
    for g in groups:
        out.setdefault(g.datacenter, []).append(g)
    return out


def _layout(dcs: dict[str, list]) -> tuple[dict[str, _Box], dict[str, _Box], float]:
    """(datacenter boxes, the first pool box of each role, the drawing's height)."""
    n = max(len(dcs), 1)
    gap = (W - 20 - n * DC_W) / max(n - 1, 1) if n > 1 else 0
    pools: dict[str, Any]
    boxes, pools, height = {}, {}, TOP
    for i, (dc, groups) in enumerate(dcs.items()):
        x = 10 + i * (DC_W + gap) if n > 1 else (W - DC_W) / 2
        h = PAD + len(groups) * (POOL_H + GAP) - GAP + 16
        boxes[dc] = _Box(x, TOP, DC_W, h)
        for j, g in enumerate(groups):
            b = _Box(x + (DC_W - POOL_W) / 2, TOP + PAD + j * (POOL_H + GAP), POOL_W, POOL_H)
            pools.setdefault(g.role, b)
            pools.setdefault(f"{g.role}#{j}@{dc}", b)
        height = max(height, TOP + h)
    return boxes, pools, height


def _pool(b: _Box, g) -> str:
    return "".join(
        [
            f'<rect x="{b.x:.0f}" y="{b.y:.0f}" width="{b.w:.0f}" height="{b.h:.0f}" rx="6" '
            'fill="#ffffff" stroke="#4c72b0" stroke-width="1.5"/>',
            _t(b.x + 10, b.y + 19, f"{g.role} · {g.gpu}", 14, font_weight="bold"),
            _t(
                b.x + 10,
                b.y + 37,
                f"{g.count} × {g.gpus_per_instance} GPUs (tp/dp/ep {g.tp}/{g.dp}/{g.ep})",
                12,
            ),
            _t(b.x + 10, b.y + 54, f"${g.cost_per_hour:,.2f}/h", 12, fill="#555"),
        ]
    )


def _arrow(
    a: _Box, b: _Box, label: str, share: float | None, mid: str, left: tuple[str, ...] = ()
) -> str:
    """An arrow from box a to box b (side to side across datacenters, top to bottom within one),
    its label at the middle (within a datacenter: right of it, and the `left` lines left of
    it, clear of a hand-off arrow leaving to the right); dashed grey where no request takes
    the path."""
    live = share is not None and share > 0
    color = "#c44e52" if live else "#999999"
    mid = f"{mid}-{'live' if live else 'idle'}"
    dash = "" if live else ' stroke-dasharray="5,4"'
    if abs(a.cx - b.cx) < 1:  # within a datacenter: down its column
        x1 = x2 = a.cx
        y1, y2 = a.y + a.h, b.y - 2
        lx, ly, anchor = a.cx + 14, (y1 + y2) / 2 + 4, "start"
    else:  # across: near the boxes' tops, clear of the line's label below
        x1, x2 = a.x + a.w, b.x - 2
        y1, y2 = a.y + 16, b.y + 16
        lx, ly, anchor = (x1 + x2) / 2, (y1 + y2) / 2 - 6, "middle"
    width = 1.5 + 3.0 * (share or 0.0)
    top = ly - 7 * (len(left) - 1)
    return (
        f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="{color}" '
        f'stroke-width="{width:.1f}"{dash} marker-end="url(#{mid})"/>'
        + _t(lx, ly, label, 12, fill=color, text_anchor=anchor, font_weight="bold")
        + "".join(
            _t(x1 - 12, top + 14 * i, t, 12, fill=color, text_anchor="end", font_weight="bold")
            for i, t in enumerate(left)
        )
    )


def _share(p: ArchitecturePlan, path: str) -> float | None:
    r = p.route_share
    return None if r is None else getattr(r, path)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _paths(p: ArchitecturePlan, pools: dict[str, _Box], mid: str) -> list[str]:
    pre = pools.get("prefill")
    dec = pools.get("main_decode") or pools.get("decode")
    relay = pools.get("relay_decode")
    out: list[str] = []
    if pre is None:
        return out
    rdma = " · RDMA"
    if dec is not None:
        same = abs(pre.cx - dec.cx) < 1
        s = _share(p, P_MD)
        out.append(_arrow(pre, dec, f"{P_MD} {_pct(s)}" + (rdma if same else ""), s, mid))
    if relay is not None:
        s_rld, s_rm = _share(p, P_RLD), _share(p, P_RLD_MD)
        both = None if s_rld is None else s_rld + (s_rm or 0.0)
        left = (f"{P_RLD} {_pct(s_rld)}", f"{P_RLD_MD} {_pct(s_rm)}")
        out.append(_arrow(pre, relay, "RDMA", both, mid, left))
        if dec is not None:
            out.append(_arrow(relay, dec, f"{P_RLD_MD} {_pct(s_rm)} (hand-off)", s_rm, mid))
    return out


def _line(p: ArchitecturePlan, boxes: dict[str, _Box]) -> str:
    ln = p.line
    if ln is None or len(boxes) < 2:
        return ""
    a, b = list(boxes.values())[:2]
    x1, x2 = a.x + a.w, b.x
    y = a.y + 8
    h = max(a.h, b.h) - 16
    cx = (x1 + x2) / 2
    use = "-" if ln.utilization is None else f"{ln.utilization * 100:.0f}% used"
    return "".join(
        [
            f'<rect x="{x1 + 6:.0f}" y="{y:.0f}" width="{x2 - x1 - 12:.0f}" height="{h:.0f}" '
            'rx="4" fill="#f4efe6" stroke="#937860" stroke-dasharray="2,2"/>',
            _t(cx, y + h - 40, f"line: {ln.count} × {ln.sku}", 12, text_anchor="middle"),
            _t(cx, y + h - 24, f"{ln.count} × {ln.gbps:g} Gb/s, {use}", 12, text_anchor="middle"),
            _t(cx, y + h - 8, f"RTT {ln.rtt_ms:g} ms", 12, text_anchor="middle", fill="#555"),
        ]
    )


def _marker(mid: str, color: str) -> str:
    return (
        f'<marker id="{mid}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        f'markerHeight="7" orient="auto"><path d="M 0 0 L 10 5 L 0 10 z" fill="{color}"/></marker>'
    )


def plan_svg(arch: str, p: ArchitecturePlan, heading: str, element_id: str = "") -> str:
    """The plan of one architecture as an SVG element (``id`` = ``element_id`` when given)."""
    dcs = _datacenters(p)
    boxes, pools, height = _layout(dcs)
    mid = f"arrow-{arch}"
    parts = [
        f'<svg viewBox="0 0 {W} {height + 10:.0f}" '
        f'role="img" class="plan-svg"'
        + (f' id="{escape(element_id)}"' if element_id else "")
        + f' aria-label="{escape(get(arch).title)} plan">',
        "<defs>"
        + _marker(f"{mid}-live", "#c44e52")
        + _marker(f"{mid}-idle", "#999999")
        + "</defs>",
        _t(10, 22, heading, 15, font_weight="bold"),
    ]
    for dc, b in boxes.items():
        parts.append(
            f'<rect x="{b.x:.0f}" y="{b.y:.0f}" width="{b.w:.0f}" height="{b.h:.0f}" rx="10" '
            'fill="#f3f6fb" stroke="#9aa9c2"/>'
        )
        parts.append(_t(b.x + 12, b.y + 22, f"datacenter {dc}", 13, fill="#334"))
    parts.append(_line(p, boxes))
    for dc, groups in dcs.items():
        for j, g in enumerate(groups):
            parts.append(_pool(pools[f"{g.role}#{j}@{dc}"], g))
    parts += _paths(p, pools, mid)
    parts.append("</svg>")
    return "".join(x for x in parts if x)
