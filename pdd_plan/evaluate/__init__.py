"""`pdd-plan evaluate`: the SLA goodput of a fleet that already exists (fleet in,
the highest rate that meets the SLA out; bisection on the analytic law, confirmed by the
simulator). `fleet` reads the fleet, `analytic` searches, `confirm` replays, `run` reports."""

from __future__ import annotations

from pdd_plan.common.entry import make_callable
from pdd_plan.evaluate.run import Options, evaluate

__all__ = ["Options", "evaluate"]

make_callable(__name__, evaluate)  # pdd_plan.evaluate(ctx, fleets) is the public entry point
