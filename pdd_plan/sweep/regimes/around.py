"""A small regime map around a plan's own point, for `report --html`.

The centre is the plan's line capacity (the PDD plan's line, count x Gb/s; else another
plan's; else the largest the scenario allows) and its request rate (the scenario's, or PDD's
goodput when the rate was free). The line axis spans x1/4 to x4 of it, the rate axis x0.5 to
x1.5: wide enough to cross the line's limit, where relay decode can pay, on most scenarios.
The centre cell is one line of that capacity priced by interpolation (regimes/axes.py), so
it need not equal the plan it is drawn around (which may lease several smaller lines).
"""

from __future__ import annotations

from pdd_plan.architectures import RELAY_ARCH
from pdd_plan.outputs.plan import Plan
from pdd_plan.sweep.regimes.axes import RegimeAxis

LINE_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
RATE_FACTORS = (0.5, 0.75, 1.0, 1.25, 1.5)


def _sig(x: float, digits: int = 3) -> float | int:
    """`x` to `digits` significant figures; an integer when it is one (tidy axis labels)."""
    v = float(f"{x:.{digits}g}")
    return int(v) if v.is_integer() else v


def centre(plan: Plan, lines_gbps: list[float], max_lines: int) -> tuple[float, float] | None:
    """(line Gb/s, rate req/s) the plan sits at; None when it crosses no line at all."""
    plans = plan.plans
    order = list(dict.fromkeys([RELAY_ARCH, *plans]))  # PDD's line first
    gbps = next(
        (plans[a].line.count * plans[a].line.gbps for a in order if a in plans and plans[a].line),  # type: ignore[union-attr]
        None,
    )
    if gbps is None and lines_gbps:
        gbps = max(lines_gbps) * max_lines
    if gbps is None:
        return None
    rate = plan.rate_rps
    if rate is None:
        rate = next(plans[a].goodput_rps for a in order if a in plans)
    return gbps, rate


def axes_around(gbps: float, rate: float) -> tuple[RegimeAxis, RegimeAxis]:
    """5 x 5: line capacity x1/4..x4 across, request rate x0.5..x1.5 up."""
    x = RegimeAxis("line_gbps", tuple(dict.fromkeys(_sig(gbps * f) for f in LINE_FACTORS)))
    y = RegimeAxis("rate_rps", tuple(dict.fromkeys(_sig(rate * f, 4) for f in RATE_FACTORS)))
    return x, y


__all__ = ["LINE_FACTORS", "RATE_FACTORS", "axes_around", "centre"]
