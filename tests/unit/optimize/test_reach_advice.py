"""An out-of-reach TTFT target's advice fits the architecture: more or faster lines only for
one that leases a line (IDC-PD keeps its KV on RDMA inside one datacenter)."""

from __future__ import annotations

import pytest

from pdd_plan import architectures
from pdd_plan.inputs.schema.scenario import SLA
from pdd_plan.optimize import diagnosis

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("arch", ["pdd", "cdc_pd", "idc_pd"])
def test_line_advice_only_where_a_line_is_leased(arch):
    sla = SLA(ttft_p90_s=2.0, ttft_p99_s=4.0, tpot_ms=60)
    reach = {0.99: (0.05, "prefill 1 x 8xh100")}  # 5% over the P99 target: out of reach
    spec = architectures.get(arch)
    (why,) = diagnosis.reach_reasons(reach, sla, spec.crosses_line)
    assert "TTFT P99 <= 4 s is out of reach: at best 5.0%" in why.message
    assert ("faster lines" in why.message) == (arch != "idc_pd")
    assert why.message.endswith("or add prefill GPUs")
