"""`pdd-plan evaluate`: the SLA goodput of a fleet that already exists (fleet in,
the highest rate that meets the SLA out; bisection on the analytic law, verified by the
simulator). `fleet` reads the fleet, `analytic` searches, `verify` replays, `run` reports."""

from __future__ import annotations

from pdd_plan.evaluate.result import ArchitectureEvaluation, Evaluation
from pdd_plan.evaluate.run import Options, evaluate

__all__ = ["Options", "evaluate", "Evaluation", "ArchitectureEvaluation"]
