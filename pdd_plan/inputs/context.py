"""Turn a validated Scenario into the objects the models use: profiles, prices, placement, lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles, speed
from pdd_plan.inputs.pieces import ClassSpec, Profiles, ReplaySetup, Sites, singular_split
from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.io import load, validation_to_input_error
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.scenario import CustomLine, Link, Scenario, line_from_custom, line_name


@dataclass(frozen=True)
class Context:
    scenario: Scenario
    file: str
    model: ModelProfile
    gpus: dict[str, GPUProfile]  # name -> profile with the scenario's price applied
    lines: list[LineSKU]
    prefill_dc: str
    relay_dc: str
    main_dc: str
    base_dir: Path
    # the speed over the perf model's the GPU profiles above run at, and why (inputs/speed)
    speed: float = 1.0
    speed_note: str | None = None

    def available(self, dc: str) -> dict[str, int]:
        return next(d.gpus for d in self.scenario.datacenters if d.name == dc)

    # the typed pieces the stages below the top one read (inputs/pieces.py)
    @property
    def sites(self) -> Sites:
        sc = self.scenario
        gpus = {d.name: dict(d.gpus) for d in sc.datacenters}
        pinned = sc.placement.main_decode
        return Sites(self.prefill_dc, self.relay_dc, self.main_dc, gpus, pinned)

    @property
    def profiles(self) -> Profiles:
        return Profiles(self.model, self.gpus, self.lines, self.scenario.engine)

    @property
    def class_spec(self) -> ClassSpec:
        sc = self.scenario
        split = singular_split(sc.policy, list(sc.architectures))
        return ClassSpec(sc.workload, sc.policy, split, sc.seed, self.base_dir, self.file)

    @property
    def replay_setup(self) -> ReplaySetup:
        sc = self.scenario
        chunk = sc.search.prefill_chunk_tokens
        return ReplaySetup(
            self.profiles, sc.sla, sc.policy, chunk, sc.workload, self.base_dir, self.file, sc.seed
        )


def load_scenario(path: str | Path) -> Scenario:
    return load(Scenario, path)


def build_context(sc: Scenario, file: str) -> Context:
    base = Path(file).resolve().parent if file else Path.cwd()
    model_ref = sc.model
    if model_ref.endswith((".yaml", ".yml")) and not Path(model_ref).is_absolute():
        model_ref = str(base / model_ref)
    model = _centred_state(sc, profiles.model(model_ref, "model", file))
    gpus: dict[str, GPUProfile] = {}
    for i, dc in enumerate(sc.datacenters):
        for name in dc.gpus:
            if name not in gpus:
                gpus[name] = profiles.gpu(name, f"datacenters[{i}].gpus.{name}", file)
    for name, g in list(gpus.items()):
        if name in sc.prices:
            price = g.price.model_copy(
                update={"usd_per_gpu_hour": sc.prices[name], "source": "scenario prices"}
            )
            gpus[name] = g.model_copy(update={"price": price})
    k, why = speed.planned_speed(sc.uncertainty, model)
    if k != 1.0:  # the plan stands on the speed band's median, as on the state band's
        gpus = speed.at_speed(gpus, k, f"the plan's speed, {k:.4g} x the perf model's,")
    lines: list[LineSKU] = []
    if sc.link is not None:
        for i, c in enumerate(sc.link.candidates):
            lines.append(_candidate(sc.link, c, i, file))
    names = [d.name for d in sc.datacenters]
    p = sc.placement
    prefill_dc = p.prefill or names[0]
    relay_dc = p.relay_decode or prefill_dc
    main_dc = p.main_decode or (names[1] if len(names) > 1 else names[0])
    return Context(sc, file, model, gpus, lines, prefill_dc, relay_dc, main_dc, base, k, why)


def _centred_state(sc: Scenario, model: ModelProfile) -> ModelProfile:
    """The model with its per-request state at the median of the scenario's stated band
    (`uncertainty.inputs.request_state_bytes`), when it states one: the plan, its replay and
    the draws' median then stand on one value. The profile's own figure is a choice at one
    end of that band (DeepSeek-V4: 0, the compressor state left out, unverified), and a plan
    at a band's end is a verdict that leans, unseen, the band's way."""
    unc = sc.uncertainty
    s = unc.inputs.request_state_bytes if unc is not None else None
    if s is None:
        return model
    centre = max(s.centre(), 0.0)  # the draws floor bytes at 0 too
    kv = model.kv_cache
    if centre == kv.per_request_state_bytes:
        return model
    why = (
        f"{kv.source} The plan's value, {centre:,.0f} B: the median of the scenario's "
        f"uncertainty.inputs.request_state_bytes ({s.source})."
    )
    kv = kv.model_copy(update={"per_request_state_bytes": centre, "source": why})
    return model.model_copy(update={"kv_cache": kv})


def _candidate(link: Link, c: str | CustomLine, i: int, file: str) -> LineSKU:
    """A `link.candidates` entry as a line SKU: a bundled profile, an inline line (on its
    `base` profile when given), with the link's RTT and per-transfer rate overrides."""
    where = f"link.candidates[{i}]"
    if isinstance(c, str):
        sku = profiles.line(c, where, file)
    elif c.base is not None:
        base = profiles.line(c.base, f"{where}.base", file)
        given = {k: getattr(c, k) for k in c.model_fields_set if k != "base"}
        given.setdefault("name", line_name(c, i))
        data = {**base.model_dump(), **given, "source": f"scenario {where} on {base.source}"}
        try:
            sku = LineSKU.model_validate(data)
        except ValidationError as e:
            raise validation_to_input_error(LineSKU, e, file, f"check {where}") from None
    else:
        sku = line_from_custom(c, i)
    if link.rtt_ms is not None:
        if sku.rtt_min_ms is not None and link.rtt_ms < sku.rtt_min_ms:
            raise InputError(
                file,
                "link.rtt_ms",
                f"{link.rtt_ms:g} ms is below line {sku.name}'s measured minimum RTT of "
                f"{sku.rtt_min_ms:g} ms",
                f"give at least {sku.rtt_min_ms:g}, or leave it out",
            )
        sku = sku.model_copy(update={"rtt_ms": link.rtt_ms})
    if link.transfer_gbps is not None:
        per = link.transfer_gbps / sku.streams_per_transfer / sku.tcp_efficiency
        sku = sku.model_copy(update={"per_connection_gbps": per})
    return sku
