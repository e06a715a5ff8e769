"""A solved day as the plan file states it: per period the fleet (base + elastic per role), its
cost, line load and path shares; the day's cost split (base, elastic with its runs' extra
hours, line) and BCR; and per period the typed single-period plan the replay and the report
read (`period_plan`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from pdd_plan.architectures import PATHS
from pdd_plan.inputs.schema.day_plan import DayArchitecture, DayGroup, DayPeriod
from pdd_plan.inputs.schema.plan import ArchitecturePlan, InstanceGroup
from pdd_plan.optimize import milp, solved
from pdd_plan.optimize import summary as optimize_summary
from pdd_plan.optimize.day.search import DaySolved
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.workload.periods import Day, reweighted


def _r(x: float, nd: int = 4) -> float:
    return float(round(float(x), nd)) + 0.0


def period_result(ds: DaySolved, day: Day, k: int) -> SolverResult:
    """Period k's fleet (base + its elastic instances) and flows as a single-rate result over
    its own tables and mix."""
    sol, pts = ds.solution, ds.points
    pt = sol.points[k]
    counts = {key: n + pt.elastic.get(key, 0) for key, n in sol.counts.items()}
    fs = milp.FleetSolution(
        "Optimal",
        sol.objective,
        period_cost(ds, k),
        pt.rate_rps,
        counts,
        ds.prefill.per_period[k] if ds.prefill is not None else sol.prefill_count,
        sol.line_index,
        pt.flows,
        sol.seconds,
        sol.binding,
    )
    t = dataclasses.replace(pts.nominal, paths=list(pts.point_paths(k)), weight=pts.class_weight[k])
    cls = reweighted(day.classes, pts.class_weight[k])
    return solved.build(dataclasses.replace(ds.shared, classes=cls), ds.combo, t, fs)


def period_cost(ds: DaySolved, k: int) -> float:
    """$/hour while period k lasts: the base, its elastic decode and prefill instances."""
    pt = ds.solution.points[k]
    pd = ds.prefill
    extra = pd.elastic(k) * pd.elastic_price if pd is not None else 0.0
    return ds.solution.base_cost_per_hour + pt.elastic_cost_per_hour + extra


def period_plan(ds: DaySolved, day: Day, k: int) -> ArchitecturePlan:
    raw = period_result(ds, day, k)
    cls = reweighted(day.classes, ds.points.class_weight[k])
    plan = optimize_summary.summarize(raw, cls, raw.rate, ds.shared.sites.prefill)
    return plan.model_copy(update={"instances": priced_instances(ds, raw, k)})


def priced_instances(ds: DaySolved, raw: SolverResult, k: int) -> list[InstanceGroup]:
    """Period k's instance groups, each instance priced once: the base fleet's at the base
    price, the period's elastic ones at on-demand (as `period_cost` counts them), so the
    groups and the line sum to the plan's $/hour."""
    groups = optimize_summary.instances(raw, ds.shared.sites.prefill)
    pt, pd, el = ds.solution.points[k], ds.prefill, ds.points.elastic
    out = []
    if pd is not None and pd.elastic(k) > 0:
        g = groups[0]
        unit = raw.prefill.cost_per_hour
        usd = pd.base * unit + pd.elastic(k) * pd.elastic_price
        out.append(g.model_copy(update={"cost_per_hour": round(usd, 2)}))
    else:
        out.append(groups[0])
    index = {o.cand.key: i for i, o in enumerate(ds.combo.md + ds.combo.rld)}
    bought = [o for o in raw.options if raw.solution.counts.get(o.cand.key, 0) > 0]
    for g, o in zip(groups[1:], bought):
        extra = pt.elastic.get(o.cand.key, 0)
        if extra <= 0 or el is None:
            out.append(g)
            continue
        base = raw.solution.counts[o.cand.key] - extra
        usd = base * o.inst.cost_per_hour + extra * float(el.cost_per_hour[index[o.cand.key]])
        out.append(g.model_copy(update={"cost_per_hour": round(usd, 2)}))
    return out


def replay_plan(ds: DaySolved, day: Day, k: int, template: ArchitecturePlan) -> ArchitecturePlan:
    """What a replay of period k reads (its instances, line, routing and rate) on `template`
    (the busiest period's full plan): summarize's TTFT quantiles are not needed to replay."""
    raw = period_result(ds, day, k)
    cls = reweighted(day.classes, ds.points.class_weight[k])
    shares = {q: v / raw.rate for q, v in raw.solution.flows.items()}
    update = {
        "instances": optimize_summary.instances(raw, ds.shared.sites.prefill),
        "line": optimize_summary.line_choice(raw),
        "routing": optimize_summary.routing(raw, cls, shares),
        "goodput_rps": float(f"{raw.rate:.6g}"),
    }
    return template.model_copy(update=update)


def _groups(ds: DaySolved) -> list[DayGroup]:
    sol = ds.solution
    cb = ds.combo
    pinst = cb.pinst
    out = [
        DayGroup(
            role="prefill",
            gpu=pinst.gpu.name,
            datacenter=ds.shared.sites.prefill,
            gpus_per_instance=pinst.n_gpus,
            tp=pinst.tp,
            dp=pinst.dp,
            ep=pinst.ep,
            base=ds.prefill.base if ds.prefill is not None else cb.n_lo,
            per_period=list(ds.prefill.per_period) if ds.prefill else [cb.n_lo] * len(sol.points),
        )
    ]
    for o in cb.md + cb.rld:
        key = o.cand.key
        per = [sol.counts.get(key, 0) + p.elastic.get(key, 0) for p in sol.points]
        if max(per) == 0:
            continue
        out.append(
            DayGroup(
                role=o.cand.role,
                gpu=o.cand.gpu,
                datacenter=o.cand.datacenter,
                gpus_per_instance=o.inst.n_gpus,
                tp=o.inst.tp,
                dp=o.inst.dp,
                ep=o.inst.ep,
                base=sol.counts.get(key, 0),
                per_period=per,
            )
        )
    return out


def _line_use(ds: DaySolved, k: int) -> float | None:
    pts, sol = ds.points, ds.solution
    ln = pts.nominal.lines[sol.line_index]
    if ln.config is None:
        return None
    paths = pts.point_paths(k)[sol.line_index]
    flows = sol.points[k].flows
    crossing = sum(flows[p] for p in flows if paths.crosses_line[p])
    if isinstance(crossing, int):
        return 0.0
    cap = ln.capacity_bytes_s * float(pts.line_speed[k])
    return _r(float(np.dot(crossing, pts.line_bytes(k))) / cap)


def run_cost_per_day(ds: DaySolved) -> float:
    """$ per day the elastic runs' extra hours (start-up, drain, billing round-up) cost."""
    el = ds.points.elastic
    if el is None or el.run_hours is None:
        return 0.0
    # the starts a run pays for, from the elastic counts as solved (cyclic, as milp/runs.py)
    cands = ds.points.nominal.md + ds.points.nominal.rld
    sol = ds.solution
    total = 0.0
    for i, c in enumerate(cands):
        e = [p.elastic.get(c.key, 0) for p in sol.points]
        starts = sum(max(e[k] - e[k - 1], 0) for k in range(len(e)))
        total += starts * float(el.run_hours[i] * el.cost_per_hour[i])
    return total


def day_architecture(ds: DaySolved, day: Day, peak_cost_per_hour: float | None) -> DayArchitecture:
    sol, pts = ds.solution, ds.points
    t = pts.nominal
    line_ph = t.lines[sol.line_index].cost_per_hour
    groups = _groups(ds)
    periods = []
    for k, p in enumerate(day.periods):
        pt = sol.points[k]
        base_roles: dict[str, int] = {}
        el_roles: dict[str, int] = {}
        for g in groups:
            base_roles[g.role] = base_roles.get(g.role, 0) + g.base
            el_roles[g.role] = el_roles.get(g.role, 0) + g.per_period[k] - g.base
        rate = pt.rate_rps
        shares = {q: float(v.sum()) / rate for q, v in pt.flows.items()}
        periods.append(
            DayPeriod(
                start_hour=p.start_hour,
                hours=p.hours,
                rate_rps=_r(p.rate_rps),
                base_per_role=base_roles,
                elastic_per_role=el_roles,
                cost_per_hour=_r(period_cost(ds, k), 2),
                line_utilization=_line_use(ds, k),
                route_share={q: _r(shares.get(q, 0.0)) for q in PATHS},
            )
        )
    hours = day.hours
    base_day = (sol.base_cost_per_hour - line_ph) * hours
    elastic_day = sum(p.elastic_cost_per_hour * q.hours for p, q in zip(sol.points, day.periods))
    elastic_day += run_cost_per_day(ds)
    if ds.prefill is not None:
        elastic_day += ds.prefill.elastic_cost_day(day)
    line_day = line_ph * hours
    cost = base_day + elastic_day + line_day
    requests = day.mean_rps * hours * 3600.0
    return DayArchitecture(
        groups=groups,
        periods=periods,
        cost_base=_r(max(base_day, 0.0), 2),
        cost_elastic=_r(elastic_day, 2),
        cost_line=_r(line_day, 2),
        cost_day=_r(cost, 2),
        peak_plan_cost_day=_r(peak_cost_per_hour * hours, 2)
        if peak_cost_per_hour is not None
        else None,
        requests=_r(requests, 1),
        bcr=_r(optimize_summary.bcr(day.mean_rps, cost / hours)),
    )
