"""The plan's law of one KV transfer over the line, per class: its mean time and its delay's
mean, variance and no-delay chance beyond the bare transfer. The one place a transfer's delay
is put together (from :mod:`limited_ps`, :mod:`found_work` and :mod:`bursts`), as
:func:`pdd_plan.latency.paths.path_times` composes it into TTFT and the KV-transfer
percentiles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan.latency.line import bursts, found_work, input_stream, limited_ps, transfer


@dataclass(frozen=True)
class TransferLaw:
    """Per class: ``total`` mean time from KV ready to delivered, ``bare`` alone on the line,
    and the delay beyond it: mean ``line_wait``, variance ``line_wait_var``, ``P(no delay)`` ``atom``."""

    total: np.ndarray
    bare: np.ndarray
    line_wait: np.ndarray
    line_wait_var: np.ndarray
    atom: np.ndarray


def transfer_law(
    size_bytes: np.ndarray,
    weight: np.ndarray,
    line: transfer.LineConfig,
    rho: float,
    stretch: float = 1.0,
    ca2: float = 1.0,
    pool: input_stream.FeedingPool | None = None,
    prefill_s: np.ndarray | None = None,
) -> TransferLaw:
    """The law of transfers of ``size_bytes`` (request shares ``weight``) on ``line`` at
    utilization ``rho``: the Poisson-fed limited-PS mean (:func:`poisson_mean_s`, times
    ``stretch``: verification's), the delay beyond the bare transfer moved by bursts (renewal
    gaps of squared CV ``ca2``), the feeding ``pool``'s smoothing and each class's own
    prefill silence (``prefill_s``; :func:`found_work.delay_parts`), its shape from the PS
    share (:func:`limited_ps.delay_shape`; with bursts, the variance moved by
    :func:`bursts.variance_ratio` plus the bursts' excess at the same squared CV, and the
    no-delay chance scaled by how often the line is idle at an arrival,
    :func:`bursts.idle_ratio`). Poisson arrivals: exactly the law before bursts.

    Memoized by value (the line by its SKU's identity and count, the pool by what the law reads
    of it): the optimizer asks for the same law of every line option under PDD and CDC-PD,
    whose line options and prefill pools are built anew per architecture but are equal."""
    xb = np.asarray(size_bytes, dtype=float)
    w = np.asarray(weight, dtype=float)
    own = None if prefill_s is None else np.asarray(prefill_s, dtype=float)
    key = (
        id(line.sku),
        int(line.count),
        float(rho),
        float(stretch),
        float(ca2),
        _pool_key(pool),
        xb.tobytes(),
        w.tobytes(),
        None if own is None else own.tobytes(),
    )
    hit = _LAW_CACHE.get(key)
    if hit is None or hit[0] is not line.sku:  # the entry keeps its SKU alive: ids stay unique
        if len(_LAW_CACHE) > _LAW_CACHE_MAX:
            _LAW_CACHE.clear()
        hit = (line.sku, _transfer_law(xb, weight, line, rho, stretch, ca2, pool, prefill_s))
        _LAW_CACHE[key] = hit
    got = hit[1]
    # a caller's change to its arrays stays its own
    return TransferLaw(*(np.array(getattr(got, f)) for f in _LAW_FIELDS))


_LAW_FIELDS = ("total", "bare", "line_wait", "line_wait_var", "atom")
_LAW_CACHE: dict[tuple, tuple] = {}
# entries hold nine per-stratum arrays (key and law): the default's planning makes 31, and a
# thousand strata x this many stays under ~40 MB
_LAW_CACHE_MAX = 512


def _pool_key(pool: input_stream.FeedingPool | None) -> tuple | None:
    """What the law reads of the feeding pool (:class:`input_stream.FeedingPool`), by value."""
    if pool is None:
        return None
    svc = np.asarray(pool.service_s, dtype=float).tobytes()
    wt = np.asarray(pool.weight, dtype=float).tobytes()
    return (float(pool.rate_rps), int(pool.count), svc, wt)


def _transfer_law(
    xb: np.ndarray,
    weight: np.ndarray,
    line: transfer.LineConfig,
    rho: float,
    stretch: float,
    ca2: float,
    pool: input_stream.FeedingPool | None,
    prefill_s: np.ndarray | None,
) -> TransferLaw:
    """:func:`transfer_law`, computed."""
    line, rho = line.loaded(rho)  # congestive loss at the line's load slows each connection
    queue, cv2, atom = _line_shape(xb, line, rho, weight)
    ramp = slow_start_mean_s(xb, line, rho, weight, queue, pool)
    pre = line.pre_line_s(xb)
    lt = pre + (poisson_mean_s(xb, line, queue, ramp) - pre) * stretch
    # the bare transfer (no other flow in the way) is fixed; queueing beyond it is random
    bare = np.minimum(transfer.bare_transfer_s(xb, line, ramp), lt)
    sz = xb / line.usable_bytes_s
    base, burst = lt - bare, np.zeros_like(xb)
    if 0 < rho < 1 and (ca2 != 1.0 or pool is not None):
        own = np.zeros_like(xb) if prefill_s is None else prefill_s
        base, burst = found_work.delay_parts(lt - bare, sz, weight, rho, ca2, pool, own)
        lt = bare + np.maximum(base + burst, 0.0)
        base = np.maximum(base, 0.0)
    j = lt - bare
    # the PS share's squared CV holds for the delay without bursts (the pool's smoothing);
    # bursts move that part's variance (bursts.variance_ratio) and add their own excess at
    # the same squared CV, taken independent of it
    with np.errstate(invalid="ignore", over="ignore"):  # no delay (j = 0): no variance
        var = np.where(j > 0, cv2 * j * j, 0.0)
    if 0 < rho < 1 and ca2 != 1.0:
        atom = np.minimum(atom * bursts.idle_ratio(sz, weight, rho, ca2), 1.0)
        with np.errstate(invalid="ignore", over="ignore"):
            lead = None if pool is None else np.asarray(own, dtype=float)  # as delay_parts'
            v = bursts.variance_ratio(sz, weight, rho, ca2, lead)
            var = np.where(j > 0, cv2 * (base * base * v + burst * burst), 0.0)
    # verification's stretch (Caps.line_delay) makes every transfer `stretch` times the law's:
    # of the delay beyond the bare time, (stretch - 1) x the bare transfer is a delay each
    # transfer has, not a share of the line some escape (no transfer goes undelayed), and the
    # rest, the share's delay stretched, keeps the share's shape. Spread whole with the
    # share's shape, a line whose transfers all run at their cap (no share: an atom of 1, a
    # squared CV of 1 or, an ulp of share over, ~1e17) read a stretched delay as "none, or
    # twice the mean" or "none, or vast", flipping with the rate's last bits
    if stretch > 1.0:
        stretched = np.clip((stretch - 1.0) * (bare - pre), 0.0, j)
        with np.errstate(invalid="ignore", divide="ignore"):
            spread = np.where(j > 0, (j - stretched) / np.where(j > 0, j, 1.0), 0.0)
        var = var * spread * spread
        atom = np.where(stretched > 0, 0.0, atom)
    return TransferLaw(lt, bare, j, var, atom)


_SHAPE_CACHE: dict[tuple, tuple] = {}


def _line_shape(
    xb: np.ndarray, line: transfer.LineConfig, rho: float, weight: np.ndarray
) -> tuple[limited_ps.LimitedPS, np.ndarray, np.ndarray]:
    """The line's queue at ``rho`` and its delay's shape (squared CV, no-delay chance) for
    these transfers (:func:`limited_ps.limited_ps`, :func:`limited_ps.delay_shape`): the same
    whatever prefill pool feeds the line, so memoized (the optimizer asks for every pool
    combination under each line option; the tagged chain's moments are most of a law)."""
    w = np.asarray(weight, dtype=float)
    key = (id(line.sku), int(line.count), float(rho), xb.tobytes(), w.tobytes())
    hit = _SHAPE_CACHE.get(key)
    if hit is None or hit[0] is not line.sku:  # the entry keeps its SKU alive: ids stay unique
        if len(_SHAPE_CACHE) > 4096:
            _SHAPE_CACHE.clear()
        queue = limited_ps.limited_ps(xb, line, rho, weight)
        cv2, atom = limited_ps.delay_shape(xb, line, rho, weight, queue)
        hit = (line.sku, queue, cv2, atom)
        _SHAPE_CACHE[key] = hit
    return hit[1], hit[2].copy(), hit[3].copy()


def slow_start_mean_s(
    x: np.ndarray,
    line: transfer.LineConfig,
    rho: float,
    weight: np.ndarray,
    queue: limited_ps.LimitedPS,
    pool: input_stream.FeedingPool | None,
) -> np.ndarray:
    """The mean slow-start penalty per size: every transfer's (``every_transfer``), none in
    steady state (``first_use``), or (``after_idle``) the restart after the idle gap of the
    sender's lanes: the line's ``rho x usable / E[x]`` transfers a second come in turn from
    the prefill instances of ``pool`` (one sender without it: Poisson; ``c`` of them:
    Erlang-``c`` gaps), each keeping its lanes busy its hold, ``x x per_byte``
    (:meth:`LineConfig.expected_idle_slow_start_s`)."""
    if line.sku.slow_start != "after_idle":
        return line.every_transfer_slow_start_s(x)
    w = np.asarray(weight, dtype=float)
    mean_x = float(np.dot(w, x) / np.sum(w))
    if rho <= 0 or mean_x <= 0:
        return line.slow_start_s(x)
    senders = max(int(pool.count), 1) if pool is not None else 1
    rate = rho * line.usable_bytes_s / mean_x / senders
    holds = np.asarray(x, dtype=float) * queue.per_byte
    return line.expected_idle_slow_start_s(x, rate, mean_x * queue.per_byte, senders, holds, w)


def poisson_mean_s(
    x: np.ndarray,
    line: transfer.LineConfig,
    queue: limited_ps.LimitedPS,
    ramp_s: np.ndarray | None = None,
) -> np.ndarray:
    """Mean time from KV ready to KV delivered for ``x``-byte transfers with Poisson arrivals:
    the setup and sender's copy, the hold (``x`` times the queue's seconds per byte), slow
    start (``ramp_s``; default: where every transfer pays it), the pool wait, and one RTT on
    delivery."""
    ramp = line.every_transfer_slow_start_s(x) if ramp_s is None else ramp_s
    hold = x * queue.per_byte + ramp
    return line.pre_line_s(x) + hold + queue.wait + line.sku.rtt_ms / 1e3
