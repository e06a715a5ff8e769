"""The planner reads straight down: only the top stages take the resolved scenario.

`optimize()`, `evaluate()` and `simulate()` (and the few entry points named below) read the
`Context` once and hand down typed pieces (`inputs.pieces`: `Sites`, `Profiles`,
`ReplaySetup`; `optimize.problem`: `Problem`, `Catalog`; `optimize.owned.OwnedPrices`).
No other function under `optimize/`, `sim/`, `evaluate/` or `workload/` takes a parameter named `ctx` or
annotated `Context`, and no other module there imports `inputs.context`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PKG = Path(__file__).resolve().parents[3] / "pdd_plan"
GATED = ("optimize", "sim", "evaluate", "workload")

# (module path under pdd_plan/, function): the top stages, each reading the Context once
TOP_STAGES = {
    ("optimize/__init__.py", "optimize"),  # api.optimize(ctx, ...): the planner's entry
    ("optimize/__init__.py", "problem_of"),  # the planner's typed inputs, built from the Context
    ("optimize/lifted.py", "line_cap_lifted"),  # plans a changed scenario through optimize()
    ("sim/run.py", "run"),  # api.simulate(ctx, ...)
    ("evaluate/run.py", "evaluate"),  # api.evaluate(ctx, fleets, ...)
    ("evaluate/fleet.py", "from_scenario"),  # the CLI reads a scenario's fleet: section
    ("evaluate/fleet.py", "from_plan"),  # the CLI reads a plan's fleets against the scenario
}
CONTEXT_MODULE = "pdd_plan.inputs.context"


def _names_context(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return "Context" in annotation.value.replace("|", " ").split()
    return any(
        (isinstance(n, ast.Name) and n.id == "Context")
        or (isinstance(n, ast.Attribute) and n.attr == "Context")
        for n in ast.walk(annotation)
    )


def context_takers(source: str) -> list[tuple[str, int, str]]:
    """(function, line, parameter) for every parameter named `ctx` or annotated `Context`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
        name = getattr(node, "name", "<lambda>")
        for p in params:
            if p.arg == "ctx" or _names_context(p.annotation):
                out.append((name, node.lineno, p.arg))
    return out


def _gated_files() -> list[Path]:
    return sorted(f for pkg in GATED for f in (PKG / pkg).rglob("*.py"))


def test_no_function_below_the_top_stages_takes_the_context():
    bad = []
    for f in _gated_files():
        rel = f.relative_to(PKG).as_posix()
        for name, line, param in context_takers(f.read_text()):
            if (rel, name) not in TOP_STAGES:
                bad.append(f"{rel}:{line} {name}({param})")
    assert not bad, "take the typed pieces (inputs/pieces.py, optimize/problem.py): " + ", ".join(
        bad
    )


def test_the_top_stages_exist_and_take_the_context():
    """The exemptions name real functions that do take it (a stale entry hides nothing)."""
    found = set()
    for f in _gated_files():
        rel = f.relative_to(PKG).as_posix()
        found |= {(rel, name) for name, _, _ in context_takers(f.read_text())}
    assert TOP_STAGES <= found, sorted(TOP_STAGES - found)


def test_only_the_top_stage_modules_import_the_context():
    top_modules = {m for m, _ in TOP_STAGES}
    bad = []
    for f in _gated_files():
        rel = f.relative_to(PKG).as_posix()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == CONTEXT_MODULE:
                if rel not in top_modules:
                    bad.append(rel)
    assert not bad, bad


def test_the_detector_sees_a_context_taker():
    src = (
        "def a(ctx): ...\n"
        "def b(c: Context): ...\n"
        "def c(c: 'Context | None'): ...\n"
        "def d(*, c: inputs.context.Context): ...\n"
        "def e(context: float, sites: Sites): ...\n"
        "class K:\n    def m(self, x, ctx=None): ...\n"
    )
    got = [(n, p) for n, _, p in context_takers(src)]
    assert got == [("a", "ctx"), ("b", "c"), ("c", "c"), ("d", "c"), ("m", "ctx")]
