"""Trace-driven simulator: replay a workload on a plan and measure it.

``run(ctx, plan, architecture, n_requests, seed)`` -> :class:`SimResult` (the top stage:
it reads the context into an ``inputs.pieces.ReplaySetup``); ``replay_plan(setup, ...)`` the
same on those pieces; ``verify(setup, plan, architecture, n_requests, seed)`` -> dict with the
SLA checks the optimizer uses to tighten and re-solve.
"""

from __future__ import annotations

from pdd_plan.sim.replay import simulate
from pdd_plan.sim.result import SimResult
from pdd_plan.sim.run import replay_plan, run, verify

__all__ = ["SimResult", "replay_plan", "run", "simulate", "verify"]
