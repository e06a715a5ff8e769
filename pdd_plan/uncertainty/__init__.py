"""Plans that say how sure they are: draws of the uncertain inputs (`draws`), every plan's
fleet evaluated under them, paired (`perturb`, `paired`), what would flip the verdict
(`sensitivity`), N-1 (`n_minus_1`), robust fleets (`robust`), replays (`replay`); `block` puts it together as the plan's block."""

from __future__ import annotations

from pdd_plan.uncertainty.block import Options, assess, plan_under_uncertainty

__all__ = ["Options", "assess", "plan_under_uncertainty"]
