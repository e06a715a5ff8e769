"""The replay's handoff table by payload (`policy.handoff_payload`, or the plan's choice under
`auto`): what main decode waits for before a relayed request's tokens are in its cache."""

from __future__ import annotations

import numpy as np

from pdd_plan.inputs.schema.scenario import Policy
from pdd_plan.latency import handoff
from pdd_plan.sim import setup
from pdd_plan.sim.queues import LineStats


def payload(pol: Policy, fl: setup.Fleet) -> str:
    """The handoff's payload: the policy's, or under `auto` the plan's choice (recompute for a
    plan that does not say)."""
    if pol.handoff_payload != "auto":
        return pol.handoff_payload
    return fl.handoff_payload or "recompute"


def price(payload: str, fl: setup.Fleet, batch: int, chunk: int, st: LineStats | None):
    """(price, memo tag) of the handoff table: recompute joined to MD's running batch (its
    TPOT-target batch), or the k tokens' KV as one transfer on the line at the utilization
    this replay's line ran at."""
    md = fl.decode[0]
    if payload == "kv" and fl.line is not None:
        span = st.span_s if st is not None and st.span_s > 0 else 0.0
        rho = st.bytes_sent / (fl.line.capacity_bytes_s * span) if span else 0.0  # type: ignore[union-attr]
        rho = round(min(rho, 0.99), 3)

        def kv(kg, contexts):
            mean = [p.mean_s for p in handoff.kv(md, np.asarray(kg, float), fl.line, rho)]
            return np.repeat(np.asarray(mean)[:, None], len(contexts), axis=1)

        return kv, ("kv", id(fl.line.sku), fl.line.count, rho)

    def rc(kg, contexts):
        return np.array(
            [
                [handoff.recompute(md, float(k), float(c), batch, chunk).mean_s for c in contexts]
                for k in kg
            ]
        )

    return rc, ("recompute", int(batch), int(chunk))
