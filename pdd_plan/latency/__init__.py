"""The analytic TTFT/TPOT model: prefill queueing, the leased line, and their composition per path."""
