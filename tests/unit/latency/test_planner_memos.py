"""The planner's memos give what the functions they stand for give: the line's queue and delay
shape per line option (latency/line/law.py) and main decode's extend times per distinct (relay
tokens, context) pair (latency/paths.py); and a caller changing what it got back does not change
what the next caller gets."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.inputs import profiles
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency import paths
from pdd_plan.latency.line import law, limited_ps, transfer
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import parallelism_candidates

pytestmark = pytest.mark.unit


def _line(gbps: float, count: int) -> transfer.LineConfig:
    sku = LineSKU(name="t", gbps=gbps, cost_per_month=1, rtt_ms=10, loss_rate=0.0)
    return transfer.LineConfig(sku, count)


@pytest.mark.parametrize("gbps,count,rho", [(20, 1, 0.6), (1, 1, 0.9), (100, 2, 0.3)])
def test_line_shape_is_the_functions_and_safe_to_change(gbps, count, rho):
    line = _line(gbps, count)
    xb = np.array([2e6, 5e7, 3e8, 1e9])
    w = np.array([0.4, 0.3, 0.2, 0.1])
    queue = limited_ps.limited_ps(xb, line, rho, w)
    cv2, atom = limited_ps.delay_shape(xb, line, rho, w, queue)
    for _ in range(2):
        got_q, got_cv2, got_atom = law._line_shape(xb, line, rho, w)
        assert got_q == queue
        assert got_cv2.tobytes() == cv2.tobytes() and got_atom.tobytes() == atom.tobytes()
        got_cv2[:] = -1.0  # a caller's change stays its own
        got_atom[:] = -1.0
    # the whole law, asked twice (the second from the memo), is the same
    a = law.transfer_law(xb, w, line, rho)
    b = law.transfer_law(xb, w, line, rho)
    for f in ("total", "bare", "line_wait", "line_wait_var", "atom"):
        assert getattr(a, f).tobytes() == getattr(b, f).tobytes()


def test_extend_times_are_the_scalar_recompute_at_rounded_keys():
    md = parallelism_candidates(profiles.model("deepseek-v4-pro"), profiles.gpu("h200"))[0]
    k = np.array([0.2, 1.0, 2.5, 3.5, 7.49, 7.5, 40.0, 40.0])
    ctx = np.array([1000.0, 1000.4, 2000.5, 2001.5, 65536.0, 65536.0, 8000.0, 8000.0])
    got = paths._extend_times(md, k, ctx)
    # round half to even, at least one token: 1, 1, 2, 4, 7, 8, 40, 40 and 1000, 1000, 2000,
    # 2002, 65536, 65536, 8000, 8000
    keys = [(1, 1000), (1, 1000), (2, 2000), (4, 2002), (7, 65536), (8, 65536), (40, 8000)]
    keys.append((40, 8000))
    want = [roofline.extend_time(md, float(a), float(c)).total_s for a, c in keys]
    assert got.tolist() == want
    assert got[0] == got[1] and got[-1] == got[-2] and got[4] < got[5]


class _Pool:
    """What transfer_law reads of a feeding pool (input_stream.FeedingPool)."""

    def __init__(self, count: int) -> None:
        self.rate_rps = 40.0
        self.count = count
        self.service_s = np.array([0.2, 0.5, 1.5, 4.0])
        self.weight = np.array([0.4, 0.3, 0.2, 0.1])


def test_transfer_law_memo_is_by_value_across_equal_lines_and_pools():
    """Two architectures build equal line configs and prefill pools anew: the second asks the
    memo and gets the first one's law, bit for bit; a different pool size is its own law, and
    a caller's change to what it got stays its own."""
    line = _line(25, 2)
    xb = np.array([2e6, 5e7, 3e8, 1e9])
    w = np.array([0.4, 0.3, 0.2, 0.1])
    own = np.array([0.2, 0.5, 1.5, 4.0])
    fields = ("total", "bare", "line_wait", "line_wait_var", "atom")
    want = law._transfer_law(xb, w, line, 0.5, 1.0, 1.0, _Pool(3), own)
    a = law.transfer_law(xb, w, line, 0.5, 1.0, 1.0, _Pool(3), own)
    for f in fields:
        getattr(a, f)[:] = -1.0  # a caller's change
    b = law.transfer_law(xb, w, transfer.LineConfig(line.sku, 2), 0.5, 1.0, 1.0, _Pool(3), own)
    for f in fields:
        assert getattr(b, f).tobytes() == getattr(want, f).tobytes()
    other = law.transfer_law(xb, w, line, 0.5, 1.0, 1.0, _Pool(4), own)
    assert other.line_wait.tobytes() != want.line_wait.tobytes()  # the pool's size matters
    assert (
        other.line_wait.tobytes()
        == law._transfer_law(xb, w, line, 0.5, 1.0, 1.0, _Pool(4), own).line_wait.tobytes()
    )
