"""Regenerate the golden outputs: `python tests/golden/make.py` (only when a change is meant
to alter plans; say why in the commit). tests/golden/test_golden.py runs the same commands and
compares byte for byte."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXAMPLES = ("pdd-paper", "narrow-line", "mooncake-conversation")


def commands(example: str, plan: Path, work: Path) -> dict[str, list[str]]:
    """Output file name -> pdd-plan argv. `plan` is written by the first command."""
    src = str(ROOT / "examples" / f"{example}.yaml")
    # the uncertainty block (on by default) is pinned on the other two examples; on the
    # trace-driven one it would add about 10 s of CPU per optimize run to the suite
    quick = ["--draws", "0"] if example == "mooncake-conversation" else []
    cmds = {
        f"{example}.optimize.yaml": ["optimize", src, "-f", "yaml", "--out", str(plan), *quick],
        f"{example}.optimize.table.txt": ["optimize", src, "--no-verify", *quick],
        f"{example}.report.md": ["report", str(plan), "-f", "markdown"],
        f"{example}.report.json": ["report", str(plan), "-f", "json"],
    }
    for a in ("pdd", "cdc_pd", "idc_pd"):
        cmds[f"{example}.simulate.{a}.json"] = [
            "simulate",
            str(plan),
            "-a",
            a,
            "-n",
            "4000",
            "-f",
            "json",
        ]
    if example == "pdd-paper":
        cmds[f"{example}.emit.sglang.txt"] = ["emit", str(plan), "-t", "sglang", "-o", str(work)]
    return cmds


def run(argv: list[str]) -> str:
    from typer.testing import CliRunner

    from pdd_plan.cli.main import app

    r = CliRunner().invoke(app, argv, env={"COLUMNS": "160"})
    if r.exit_code != 0:
        raise SystemExit(f"pdd-plan {' '.join(argv)} failed ({r.exit_code}): {r.output}")
    return r.stdout


def tree_text(folder: Path) -> str:
    """Every file under folder, path then contents: emit's output as one comparable text."""
    parts = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        parts.append(f"=== {f.relative_to(folder)}\n{f.read_text(encoding='utf-8')}")
    return "\n".join(parts)


def _planned(plan: Path, arch: str) -> bool:
    from pdd_plan.outputs.plan import load_plan

    return arch in load_plan(plan).plans


def outputs(example: str, tmp: Path) -> dict[str, str]:
    plan, work = tmp / f"{example}.plan.yaml", tmp / f"{example}-emit"
    out = {}
    for name, argv in commands(example, plan, work).items():
        if argv[0] == "simulate" and not _planned(plan, argv[3]):
            continue  # the architecture does not meet the scenario (e.g. misses in the replay)
        text = run(argv)
        out[name] = tree_text(work) if name.endswith("emit.sglang.txt") else text
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for ex in sys.argv[1:] or EXAMPLES:
            for name, text in outputs(ex, Path(d)).items():
                (HERE / name).write_text(text, encoding="utf-8")
                print("wrote", name)
