"""Continuous-batching decode on relay decode (RLD) and main decode (MD), with the handoff.

Each decode instance runs a batch of at most ``bmax`` requests (the batch that meets the TPOT
target) whose reserved KV (``kv_bytes(input + output)``, the final context) fits its pool;
arrivals that do not fit wait FIFO. The batch advances in *fluid steps*: with ``B`` requests
running, every one of them gains one token per ``step(B, mean context)`` seconds (the roofline
decode step, tabulated). A request admitted when the instance's step counter was ``G0`` and
needing ``k`` tokens leaves when the counter reaches ``G0 + k``; between arrivals and departures
the batch is constant, so the engine only has events at those instants (a heap of finish tags
per instance, one global heap of next departures). Approximations, by design: steps are
fractional (no step boundaries), a request's first token is at its admission plus one step at
the batch it joins, and prefill/extend passes do not slow the decode batch.

PDD relay (``p_rld_md``): RLD starts decoding when the KV arrives over RDMA, capped at
``relay_max_tokens``. When the KV has crossed the line (delivery at MD):

* ``one_shot`` - RLD stops at once and sends the ``k`` token ids (one-way line latency); MD
  recomputes their KV (extend) and joins the request to its batch (the user sees a stall);
* ``catch_up`` - RLD keeps decoding while its ``k0`` token ids travel and MD runs their extend;
  then RLD hands over (the few tokens made meanwhile are taken as caught up: their recompute
  is neglected).

A request that hit the relay cap before its KV arrived pauses on RLD (stall) until MD has
extended the whole relay. ``p_rld`` requests decode entirely on RLD.
"""

from __future__ import annotations

import numpy as np

from pdd_plan.sim import kernels
from pdd_plan.sim.decode import state
from pdd_plan.sim.decode.io import DecodeInputs, DecodeResult, Engine
from pdd_plan.sim.queues import Progress, Route
from pdd_plan.sim.states import Event

_CHUNK = 1 << 20  # events per entry into the compiled loop, between progress callbacks
__all__ = ["DecodeInputs", "DecodeResult", "Decoder", "Engine", "run_decode", "static_events"]


class Decoder:
    """The decode state (flat arrays: :mod:`pdd_plan.sim.decode.state`) and one method per
    event, each running the compiled handler of :mod:`pdd_plan.sim.decode.kernel` - what
    :func:`run_decode` runs in one compiled loop, callable one event at a time (tests).
    Attributes read the state by name: ``d.first``, ``d.B``, ``d.nxt``..."""

    def __init__(self, inp: DecodeInputs, t0: float = 0.0):
        kernels.load()  # numba and the kernels, loaded once when a replay needs them
        from pdd_plan.sim.decode import kernel  # (as above: not with the CLI)

        kernel.ready(kernel.run_events)  # run() needs only the event loop's compiled code
        self.kernel = kernel
        self.R = state.requests(inp)
        self.Q, self.T, slots = state.instances(inp, t0)
        bmax = int(self.Q["bm"].max()) if len(self.Q) else 1
        self.W = state.work(slots, bmax, len(self.R), t0)

    def __getattr__(self, name: str) -> np.ndarray:
        for group in ("R", "Q"):
            g = self.__dict__.get(group)
            if g is not None and name in g.dtype.names:
                return g[name]
        raise AttributeError(name)

    def _handler(self, name: str):
        """A handler, callable from Python (tests call them one event at a time)."""
        return self.kernel.from_python(getattr(self.kernel, name))

    def kv_at_rld(self, r: int, t: float) -> None:
        self._handler("kv_at_rld")(self.R, self.Q, self.T, self.W, int(r), float(t))

    def kv_at_md(self, r: int, t: float) -> None:
        self._handler("kv_at_md")(self.R, self.Q, self.T, self.W, int(r), float(t))

    def handoff(self, r: int, t: float) -> None:
        self._handler("handoff")(self.R, self.Q, self.T, self.W, int(r), float(t))

    def caught_up(self, r: int, t: float) -> None:
        self._handler("caught_up")(self.R, self.Q, self.T, self.W, int(r), float(t))

    def departures(self, k: int, t: float) -> None:
        self._handler("departures")(self.R, self.Q, self.T, self.W, int(k), float(t))

    def run(self, s_t: np.ndarray, s_k: np.ndarray, s_r: np.ndarray, progress: Progress) -> float:
        """Every event, in chunks between progress callbacks; returns the last event's time."""
        S = len(s_t)
        while True:
            progress("decode", int(self.W.counts[self.kernel.NEXT]), S)
            if self.kernel.run_events(self.R, self.Q, self.T, self.W, s_t, s_k, s_r, _CHUNK):
                return float(self.W.now[0])

    def result(self, span: float) -> DecodeResult:
        R = self.R
        return DecodeResult(
            R["first"].copy(),
            R["end"].copy(),
            R["rk"].copy(),
            R["md_arr"].copy(),
            R["md_adm"].copy(),
            R["md_of"].astype(np.int32),
            [a / span if span > 0 else 0.0 for a in self.Q["area"].tolist()],
            span,
        )


def _static(inp: DecodeInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rt = np.asarray(inp.route)
    a_rld = np.flatnonzero((rt == Route.P_RLD_MD) | (rt == Route.P_RLD))
    a_md = np.flatnonzero(rt == Route.P_MD)
    a_ho = np.flatnonzero(rt == Route.P_RLD_MD)
    t_md, t_rld = np.asarray(inp.t_md, dtype=float), np.asarray(inp.t_rld, dtype=float)
    times = np.concatenate([t_rld[a_rld], t_md[a_md], t_md[a_ho]])
    kinds = np.concatenate(
        [
            np.full(len(a_rld), Event.KV_AT_RLD, np.int64),
            np.full(len(a_md), Event.KV_AT_MD, np.int64),
            np.full(len(a_ho), Event.HANDOFF, np.int64),
        ]
    )
    rids = np.concatenate([a_rld, a_md, a_ho]).astype(np.int64)
    order = np.lexsort((rids, kinds, times))
    return times[order], kinds[order], rids[order]


def static_events(inp: DecodeInputs) -> tuple[list[float], list[int], list[int]]:
    """(times, kinds, requests) of the events known up front, sorted by (time, kind, request):
    KV at RLD (routes through RLD), KV at MD (p_md), handoff (p_rld_md)."""
    times, kinds, rids = _static(inp)
    return times.tolist(), kinds.tolist(), rids.tolist()


def _noop(stage: str, done: int, total: int) -> None:
    pass


def run_decode(inp: DecodeInputs, progress: Progress | None = None) -> DecodeResult:
    """Replay decode: merge the static events, the dynamic heap and the instances' departures
    in time order (departures first on ties, then static events, then the heap)."""
    s_t, s_k, s_r = _static(inp)
    t0 = float(s_t[0]) if len(s_t) else 0.0
    d = Decoder(inp, t0)
    t = d.run(s_t, s_k, s_r, progress or _noop)
    return d.result(t - t0)
