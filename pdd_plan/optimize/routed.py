"""The MILP's routing as the replay's router carries it out.

The MILP routes each class by a share (a flow per path), which may split a class or leave a
relayed class's singular requests on `p_rld_md`. The router the plan hands over is a rule on
each request: relay at or below a hit rate (the upper edge of the highest hit bin the MILP
relays from, :func:`relay_threshold`), and of those, finish the singular ones (output at most
``singular_max_output_tokens``) on relay decode. The plan's percentiles, route shares and line
load are of the requests as the rule routes them (:func:`router_flows`), the replay's routing,
not of the MILP's shares spread evenly over each class's strata. Classes are hit bins (x an
output split at the singular cap, x input buckets), so the rule routes every class, and every
stratum of it, whole.

`policy.router: backlog` routes on the line's backlog as it stands when a request's KV is
ready: no per-class rule predicts it, so its plans keep the MILP's shares."""

from __future__ import annotations

from typing import cast

import numpy as np

from pdd_plan.architectures import P_MD, P_RLD, P_RLD_MD
from pdd_plan.inputs.schema.scenario import Policy
from pdd_plan.workload.requests import RequestClasses
from pdd_plan.workload.stats import HIT_BIN_EDGES, hit_bin_index


def relay_threshold(relayed_hit_p: np.ndarray) -> float | None:
    """The hit rate at or below which requests relay: the upper edge of the highest hit-rate
    bin holding a relayed class. Classes are hit bins (x length buckets) and the optimizer
    routes a class as a whole, so relaying its members by their own hit sends the share it
    planned; the class mean (its members' average) would relay only about half of that bin."""
    if relayed_hit_p.size == 0:
        return None
    return float(HIT_BIN_EDGES[int(np.max(hit_bin_index(relayed_hit_p))) + 1])


def planned_threshold(
    flows: dict[str, np.ndarray], classes: RequestClasses, rate: float
) -> float | None:
    """:func:`relay_threshold` of the classes the MILP relays any share of (``flows`` per path
    and class, requests/s at ``rate``)."""
    relayed = (flows.get(P_RLD_MD, 0) + flows.get(P_RLD, 0)) / max(rate, 1e-300) > 1e-9
    return relay_threshold(classes.hit_p[np.asarray(relayed, dtype=bool)])


def router_flows(
    flows: dict[str, np.ndarray],
    classes: RequestClasses,
    rate: float,
    policy: Policy,
    singular_max: int | None,
    has_relay: bool = True,
) -> dict[str, np.ndarray] | None:
    """``flows`` (requests/s per path and class) re-routed as the replay's router routes them:
    every class at or below the threshold (the plan's, or ``policy.relay_hit_threshold``
    under ``router: hit_threshold``) relays whole, its singular classes (mean output at most
    ``singular_max``; the classes are split there) on ``p_rld``; the rest go direct. None
    where the MILP's shares stand: no relay path or pool (``has_relay``), or the backlog
    router."""
    if P_RLD_MD not in flows or policy.router == "backlog" or not has_relay:
        return None
    total = cast(np.ndarray, sum(flows.values()))  # per class: flows are arrays
    if policy.router == "hit_threshold":
        at: float | None = float(policy.relay_hit_threshold.at_or_below)
    else:
        at = planned_threshold(flows, classes, rate)
    out = {k: np.zeros_like(total) for k in flows}
    relay = classes.hit_p <= at if at is not None else np.zeros(len(total), dtype=bool)
    single = np.zeros_like(relay)
    if singular_max is not None and P_RLD in flows:
        single = classes.output_tokens <= singular_max
    out[P_MD] = np.where(relay, 0.0, total)
    out[P_RLD_MD] = np.where(relay & ~single, total, 0.0)
    if P_RLD in out:
        out[P_RLD] = np.where(relay & single, total, 0.0)
    return out


def crossing_weight(
    flows: dict[str, np.ndarray], crosses: dict[str, bool], classes: RequestClasses
) -> np.ndarray:
    """Per stratum of ``classes.fine``, the request share whose KV crosses the line under
    ``flows``: the line's queue is made of these transfers, not of every request's."""
    total = sum(flows.values())
    cross = sum((flows[k] for k in flows if crosses[k]), np.zeros_like(total))
    part = np.divide(cross, total, out=np.zeros_like(total), where=total > 0)
    if classes.nodes is None or classes.node_class is None:
        return classes.weight * part
    return classes.nodes.weight * part[classes.node_class]
