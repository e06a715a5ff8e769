"""Does a verification replay's early stop ever change its verdict? Each scenario's verified plan,
every architecture replayed again with and without the early stop (`sim.run.verify`).

Run: python -m benchmarks.early_stop_verdicts [SCENARIO.yaml ...]   (default: the bundled
examples at one rate and benchmarks/scenarios/large.yaml; ~1-2 min)

One line per (scenario, architecture): where the early-stopped replay stopped (or "full" when no
look settled every verdict), both verdicts, and whether they agree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pdd_plan.architectures import REGISTRY
from pdd_plan.common.errors import InputError, PddPlanError
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize
from pdd_plan.sim.run import verify

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [
    *(
        ROOT / "examples" / f"{n}.yaml"
        for n in (
            "pdd-paper",
            "narrow-line",
            "mooncake-conversation",
            "pdd-paper-fleet",
            "pdd-paper-uncertain",
        )
    ),
    ROOT / "benchmarks" / "scenarios" / "large.yaml",
]


def compare(path: str, n_requests: int = 20_000) -> list[tuple[str, str, bool, bool]]:
    """(architecture, where the early replay stopped, early verdict, full verdict) per planned
    architecture."""
    ctx = build_context(load_scenario(path), path)
    plan = optimize(ctx, verify=True, sim_requests=n_requests)
    out = []
    for a in REGISTRY:
        try:
            early = verify(ctx.replay_setup, plan, a, n_requests, None, stop_early=True)
        except InputError:  # not planned (infeasible): nothing to replay
            continue
        full = verify(ctx.replay_setup, plan, a, n_requests, None, stop_early=False)
        stop = early.early_stop
        out.append((a, str(stop.replayed) if stop else "full", early.sla_met, full.sla_met))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", type=Path, default=DEFAULT)
    args = ap.parse_args()
    differ = 0
    for p in args.scenarios:
        try:
            found = compare(str(p))
        except PddPlanError as e:  # a scenario that cannot be read or planned: its one line
            raise SystemExit(f"error: {e}") from None
        for a, stop, e, f in found:
            same = e == f
            differ += not same
            print(
                f"{p.name} {a}: stopped at {stop}; early {e}, full {f}: {'same' if same else 'DIFFERS'}"
            )
    print(f"verdicts that differ: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
