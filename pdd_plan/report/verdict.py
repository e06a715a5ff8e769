"""The answer in one sentence per baseline, read from the plan's one verdict: the gain is
``comparison.bcr_gain_vs_<baseline>`` and its probability
``uncertainty.comparisons.<baseline>.p_beats`` (the names the plan keeps for the verdict, so the
page says what the summary and the JSON say). Renders only; computes nothing.

"Ties" is a gain that prints as +0.0% (under 0.05 points): the comparison is stated to that
precision everywhere it is printed."""

from __future__ import annotations

from pdd_plan import architectures
from pdd_plan.outputs.plan import Plan

TIE = 0.0005  # |gain| below this prints as +0.0%: the verdict is a tie


def _baselines(plan: Plan) -> list[str]:
    """The baselines the relay architecture is compared with: the local one first."""
    order = (architectures.LOCAL_BASELINE, architectures.LINE_BASELINE)
    names = list(plan.inputs.architectures or []) + list(plan.plans) + list(plan.infeasible)
    return [b for b in order if b in names]


def _how_sure(plan: Plan, base: str) -> str:
    u = plan.uncertainty
    v = None if u is None else u.comparisons.get(base)
    if v is None:
        return "no draws of the uncertain inputs (optimize --draws N says how sure)"
    relay = architectures.get(architectures.RELAY_ARCH).title
    t = architectures.get(base).title
    tie = f", tied in {v.ties:.0%}" if v.ties > 0 else ""
    return f"P({relay} beats {t}) = {v.p_beats:.0%} over {u.draws} draws{tie}"  # type: ignore[union-attr]


def sentence(plan: Plan, base: str) -> str:
    """'PDD beats | trails | ties IDC-PD by x% ...' with its probability."""
    relay_key = architectures.RELAY_ARCH
    relay = architectures.get(relay_key).title
    t = architectures.get(base).title
    plans = plan.plans
    if relay_key not in plans:
        why = "has no plan" if relay_key not in plan.infeasible else "has no plan meeting the SLA"
        return f"{relay} {why}: {t} is the answer." if base in plans else f"{relay} {why}."
    if base not in plans:
        return f"{relay} beats {t} by default: {t} has no plan meeting the SLA."
    gain = getattr(plan.comparison, f"bcr_gain_vs_{base}", None)
    a, b = plans[relay_key], plans[base]
    if gain is None:
        return f"{relay} and {t} cannot be compared (no BCR for one of them)."
    word = "ties" if abs(gain) < TIE else ("beats" if gain > 0 else "trails")
    by = "" if word == "ties" else f" by {abs(gain) * 100:.1f}%"
    return (
        f"{relay} {word} {t}{by} in requests served within the SLA per dollar (BCR "
        f"{a.bcr:,.1f} vs {b.bcr:,.1f} req/$, ${a.cost_per_hour:,.2f}/h vs "
        f"${b.cost_per_hour:,.2f}/h); {_how_sure(plan, base)}."
    )


def sentences(plan: Plan) -> list[str]:
    """One sentence per baseline, the local baseline (IDC-PD) first."""
    return [sentence(plan, b) for b in _baselines(plan)]


def recommended(plan: Plan) -> str | None:
    """The architecture whose plan the page draws large: the highest BCR; on a tie the one
    listed first (the relay architecture before its baselines)."""
    if not plan.plans:
        return None
    return max(plan.plans, key=lambda a: plan.plans[a].bcr)
