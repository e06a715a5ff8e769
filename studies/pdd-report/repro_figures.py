"""The PDD report's figures (docs/reference/pdd-facts.md), each with what pdd-plan does with it:
`input` (the experiment's setting or a calibration's data), `fitted` (a calibration's target)
or `predicted` (compared with the prediction), and `not_predicted` (PDD's own P90/P99: the SLA
was read from them, so matching them proves nothing)."""

from __future__ import annotations

# (low, high) is a range the report gives
REPORT: dict[str, dict] = {
    "idc_goodput": {"value": 9.0, "unit": "req/s", "role": "fitted"},
    "pdd_goodput": {"value": 11.5, "unit": "req/s", "role": "predicted"},
    "goodput_gain_pct": {"value": 27.8, "unit": "%", "role": "predicted"},
    "cost_change_pct": {"value": (-7.1, -3.5), "unit": "%", "role": "predicted"},
    "bcr_gain_pct": {"value": (32.4, 37.5), "unit": "%", "role": "predicted"},
    "cdc_ttft_p90_s": {"value": 18.3, "unit": "s", "role": "predicted"},
    "pdd_ttft_p90_s": {"value": 9.8, "unit": "s", "role": "not_predicted"},
    "cdc_ttft_p99_s": {"value": 29.7, "unit": "s", "role": "predicted"},
    "pdd_ttft_p99_s": {"value": 14.4, "unit": "s", "role": "not_predicted"},
    "ttft_p90_change_pct": {"value": -46.0, "unit": "%", "role": "predicted"},
    "ttft_p99_change_pct": {"value": -51.5, "unit": "%", "role": "predicted"},
    "rld_token_share_pct": {"value": 6.2, "unit": "%", "role": "predicted"},
    "cdc_ttft_p50_s": {"value": 6.7, "unit": "s", "role": "predicted"},
    "local_ttft_p50_s": {"value": 4.2, "unit": "s", "role": "predicted"},
    "kv_transfer_p50_s": {"value": 1.0, "unit": "s", "role": "predicted"},
    "kv_transfer_p99_s": {"value": (1.0, 20.0), "unit": "s", "role": "predicted"},
    "extend_mean_ms": {"value": 305.0, "unit": "ms", "role": "predicted"},
    "extend_max_ms": {"value": 321.4, "unit": "ms", "role": "predicted"},
    "extend_sd_ms": {"value": 4.8, "unit": "ms", "role": "predicted"},
    "kv_handoff_mean_ms": {"value": 185.0, "unit": "ms", "role": "fitted"},
    "kv_handoff_max_ms": {"value": 512.6, "unit": "ms", "role": "fitted"},
}

LABEL = {
    "idc_goodput": "IDC-PD SLA goodput",
    "pdd_goodput": "PDD SLA goodput",
    "goodput_gain_pct": "PDD goodput over IDC-PD",
    "cost_change_pct": "PDD cost against IDC-PD",
    "bcr_gain_pct": "BCR gain over IDC-PD (SLA goodput per $)",
    "cdc_ttft_p90_s": "CDC-PD P90 TTFT at PDD's load",
    "pdd_ttft_p90_s": "PDD P90 TTFT",
    "cdc_ttft_p99_s": "CDC-PD P99 TTFT at PDD's load",
    "pdd_ttft_p99_s": "PDD P99 TTFT",
    "ttft_p90_change_pct": "P90 TTFT, CDC-PD -> PDD",
    "ttft_p99_change_pct": "P99 TTFT, CDC-PD -> PDD",
    "rld_token_share_pct": "RLD share of output tokens",
    "cdc_ttft_p50_s": "P50 TTFT, decode in another city (CDC-PD)",
    "local_ttft_p50_s": "P50 TTFT, decode in the same datacenter",
    "kv_transfer_p50_s": "KV transfer, median",
    "kv_transfer_p99_s": "KV transfer, P99 (report: 1-20 s)",
    "extend_mean_ms": "recompute handoff (extend), mean",
    "extend_max_ms": "recompute handoff (extend), max",
    "extend_sd_ms": "recompute handoff (extend), s.d.",
    "kv_handoff_mean_ms": "KV handoff (4,649 KB) over the line, mean",
    "kv_handoff_max_ms": "KV handoff (4,649 KB) over the line, worst (a cold start)",
}

# the report's cost table in GPU-A hours: 88 A against 43 A + 32 B + the line (~0.3 A)
REPORT_GPUS = {"idc_pd": {"h100": 88}, "pdd": {"h100": 43, "h200": 32}}

# the handoff microbenchmark (pdd-facts.md, "The report's line, as measured"): 100 generated
# tokens at 64K context
HANDOFF_TOKENS = 100
HANDOFF_CONTEXT = 65_536
