"""The line law against the replay on the hand-written fleets of the law-vs-replay tests.

Usage: ``python -m benchmarks.line_law_vs_replay [--only NAME,...]``

Each case of `tests/integration/test_line_law_vs_replay.py` (`CASES`; fleets written in
`tests/law_fleets.py`, not the optimizer's) is evaluated as `pdd-plan evaluate` does
(`evaluate.analytic.at_rate`) and replayed, seeded, at the same rate; printed: law / replay - 1
for TTFT and the KV transfer, P50 / P90 / P99. The test holds each within 15%; this prints the
figures. Minutes: the narrow-line cases replay 100,000 requests, the default's 200,000.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def pct(xs: list[float]) -> str:
    return " / ".join(f"{x:+.1%}".replace("%", "") for x in xs) + " %"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    from tests.integration.test_line_law_vs_replay import CASES
    from tests.law_fleets import compare

    only = set(filter(None, args.only.split(",")))
    print("| case | architecture | rate req/s | requests | TTFT | KV transfer |")
    print("|---|---|---:|---:|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for c in CASES:
            if only and c.name not in only:
                continue
            e = compare(Path(tmp), c).errors()
            kv = pct(e[3:]) if len(e) == 6 else "(no line)"
            print(f"| {c.name} | {c.arch} | {c.rate:g} | {c.n:,} | {pct(e[:3])} | {kv} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
