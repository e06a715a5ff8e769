"""Gates on the code itself, so a newcomer can keep finding things in one hop: a layer order
and no import cycle between modules or packages (imports inside functions included), report
rendering only, no module over 450 lines, complexity at most 15, no
comparison with an architecture name and no path name spelled outside the architecture spec."""

from __future__ import annotations

import ast
import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pdd_plan import architectures
from pdd_plan.outputs.plan import RouteShare
from pdd_plan.sim.queues import Route

pytestmark = pytest.mark.unit

PKG = Path(__file__).resolve().parents[3] / "pdd_plan"
MAX_LINES = 450
MAX_COMPLEXITY = 15


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(current: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def _parse(text: str) -> ast.Module:
    """A source's tree, parsed once a session: the gates below walk every module's tree, several
    times each (read only)."""
    return ast.parse(text)


def _tree(path: Path) -> ast.Module:
    return _parse(path.read_text(encoding="utf-8"))


def import_graph() -> dict[str, set[str]]:
    """module -> the pdd_plan modules it imports, anywhere in its body. `from pkg import name`
    counts as importing pkg.name when that is a module, else pkg itself. (A copy of the
    session's graph: a caller may change its own.)"""
    return {m: set(t) for m, t in _import_graph().items()}


@functools.lru_cache(maxsize=1)
def _import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        tree = _tree(path)
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(m, is_pkg, node)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in mods else base)
            for t in targets:
                if t in mods and t != m:
                    graph[m].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path of modules, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(sorted(graph[nxt]))))
                path.append(nxt)
    return None


# the layers, lowest first: a package imports from its own row and the rows before it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("architectures", "common"),  # base: the architecture spec; errors, atomic writes, limits
    ("inputs",),  # scenario and profile schemas, profiles, the resolved Context
    ("outputs",),  # the plan file's schema (what the planner writes) and its placement check
    ("perf", "workload", "latency"),  # models
    ("calibration",),  # fitting
    ("optimize", "evaluate", "sim"),  # planning
    ("uncertainty",),  # every plan under draws of the uncertain inputs
    ("sweep",),  # many runs
    ("report", "emit", "cli", "api"),  # edges (api: the Python entry points)
)
LAYER_OF = {pkg: i for i, row in enumerate(LAYERS) for pkg in row}


def _package(module: str) -> str | None:
    """The top-level package of a pdd_plan module (None for pdd_plan itself, the lazy API)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a lower layer to a higher one, as 'module -> module'."""
    out = []
    for m, targets in sorted(graph.items()):
        a = _package(m)
        for t in sorted(targets):
            b = _package(t)
            if a is not None and b is not None and LAYER_OF[b] > LAYER_OF[a]:
                out.append(f"{m} ({LAYERS[LAYER_OF[a]][0]} row) -> {t}")
    return out


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Top-level package -> the packages its modules import."""
    out: dict[str, set[str]] = {p: set() for p in LAYER_OF}
    for m, targets in graph.items():
        a = _package(m)
        for t in targets:
            b = _package(t)
            if a is not None and b is not None and a != b:
                out[a].add(b)
    return out


def test_every_package_has_a_layer():
    packages = {_package(m) for m in _modules()} - {None}
    assert packages == set(LAYER_OF), f"unplaced: {packages - set(LAYER_OF)}"


def test_no_import_from_a_lower_layer_to_a_higher_one():
    found = upward_imports(import_graph())
    assert not found, "imports against the layer order: " + "; ".join(found)


def test_no_package_cycle():
    # the module-level gate cannot see a cycle between packages through different modules
    cycle = find_cycle(package_graph(import_graph()))
    assert cycle is None, "package cycle: " + " -> ".join(cycle or [])


def test_layer_gate_sees_a_planted_upward_import():
    g = {"pdd_plan.outputs.placement": {"pdd_plan.optimize.search.enumeration"}}
    assert upward_imports(g) == [
        "pdd_plan.outputs.placement (outputs row) -> pdd_plan.optimize.search.enumeration"
    ]
    assert (
        find_cycle(
            package_graph(
                {
                    "pdd_plan.sim.a": {"pdd_plan.optimize.b"},
                    "pdd_plan.optimize.c": {"pdd_plan.sim.d"},
                }
            )
        )
        is not None
    )


# inside optimize/: its stages, lowest first; a module imports from its own row and the rows
# before it, so the base types and the MILP never reach up into a driver
OPTIMIZE_STAGES: tuple[tuple[str, ...], ...] = (
    # problem -> tables -> MILP -> solved -> summary: the base types every driver shares
    ("problem", "owned", "caps", "tables", "points", "routed", "diagnosis", "milp", "solved"),
    ("summary",),  # measures a solved plan (the routed figures, the percentiles)
    ("search",),  # the drivers: one architecture at one rate, or with the rate free
    ("day",),  # a day of periods, over the single-rate drivers
    # the top: verification's loop, what it compares after, and optimize() itself ("")
    ("verify", "tails", "contains", "lifted", ""),
)
OPTIMIZE_STAGE_OF = {m: i for i, row in enumerate(OPTIMIZE_STAGES) for m in row}


def _optimize_stage(module: str) -> str | None:
    """The stage of a module under pdd_plan.optimize ("" for the package itself), else None."""
    parts = module.split(".")
    if parts[:2] != ["pdd_plan", "optimize"]:
        return None
    return parts[2] if len(parts) > 2 else ""


def upward_optimize_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports inside optimize/ from a lower stage to a higher one, as 'module -> module'."""
    out = []
    for m, targets in sorted(graph.items()):
        a = _optimize_stage(m)
        if a is None:
            continue
        for t in sorted(targets):
            b = _optimize_stage(t)
            if b is not None and OPTIMIZE_STAGE_OF[b] > OPTIMIZE_STAGE_OF[a]:
                out.append(f"{m} ({OPTIMIZE_STAGES[OPTIMIZE_STAGE_OF[a]][0]} stage) -> {t}")
    return out


def test_every_optimize_module_has_a_stage():
    stages = {_optimize_stage(m) for m in _modules()} - {None}
    assert stages == set(OPTIMIZE_STAGE_OF), f"unplaced: {stages - set(OPTIMIZE_STAGE_OF)}"


def test_no_base_module_of_optimize_imports_a_driver():
    found = upward_optimize_imports(import_graph())
    assert not found, "imports against optimize/'s stages: " + "; ".join(found)


def test_optimize_stage_gate_sees_a_planted_upward_import():
    g = {
        "pdd_plan.optimize.solved": {"pdd_plan.optimize.search.enumeration"},
        "pdd_plan.optimize.search.fixed_rate": {"pdd_plan.optimize.solved"},  # downward: fine
        "pdd_plan.optimize.search.plan": {"pdd_plan.optimize.day.search"},
    }
    assert upward_optimize_imports(g) == [
        "pdd_plan.optimize.search.plan (search stage) -> pdd_plan.optimize.day.search",
        "pdd_plan.optimize.solved (problem stage) -> pdd_plan.optimize.search.enumeration",
    ]


def test_optimize_has_one_problem_module():
    found = sorted(str(p.relative_to(PKG)) for p in (PKG / "optimize").rglob("problem.py"))
    assert found == ["optimize/problem.py"], found


def _closure(graph: dict[str, set[str]], roots: set[str]) -> set[str]:
    seen, todo = set(), list(roots)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    return seen


def test_report_renders_only():
    # report draws what it is handed: neither the simulator nor the optimizer is reachable
    g = import_graph()
    report = {m for m in g if _package(m) == "report"}
    reached = _closure(g, report)
    solving = sorted(m for m in reached if _package(m) in ("sim", "optimize", "evaluate"))
    assert not solving, f"report reaches {solving}"


def uncommented_function_imports(path: Path) -> list[str]:
    """Imports inside functions with no comment saying why (on their lines or the line above)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out = []
    for fn in ast.walk(_parse(text)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom):
                span = lines[node.lineno - 2 : node.end_lineno]
                if not any("#" in x for x in span):
                    out.append(f"{path.relative_to(PKG)}:{node.lineno}")
    return out


def test_imports_inside_functions_say_why():
    # only heavy or optional dependencies load late (numba kernels, matplotlib, dask, pandas,
    # scipy.optimize); cli/ is apart: each command imports its engine when it runs, so
    # `pdd-plan --help` and the light commands do not load the MILP, numba or matplotlib
    found = [
        x
        for p in sorted(PKG.rglob("*.py"))
        if "cli" not in p.relative_to(PKG).parts
        for x in uncommented_function_imports(p)
    ]
    assert not found, "say why these imports are inside functions: " + ", ".join(found)


def test_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_graph_sees_imports_inside_functions():
    g = import_graph()
    # cli.main imports ..optimize inside the optimize command's body
    assert "pdd_plan.optimize" in g["pdd_plan.cli.main"]


def test_no_module_over_the_line_limit():
    long = {
        m: n
        for m, p in _modules().items()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def _name_comparisons(path: Path) -> list[str]:
    names = set(architectures.names())
    out = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Eq | ast.NotEq) for op in node.ops
        ):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in names:
                    out.append(f"{path.name}:{node.lineno} compares with '{side.value}'")
    return out


def test_architecture_names_are_compared_only_in_the_spec():
    spec = PKG / "architectures.py"
    found = [x for p in PKG.rglob("*.py") if p != spec for x in _name_comparisons(p)]
    assert not found, "ask pdd_plan.architectures instead: " + "; ".join(found)


def test_name_comparison_detector_sees_one():
    probe = PKG.parent / "tests" / "_probe_arch_compare.py"
    probe.write_text('def f(a):\n    return a == "idc_pd"\n', encoding="utf-8")
    try:
        assert _name_comparisons(probe) == ["_probe_arch_compare.py:2 compares with 'idc_pd'"]
    finally:
        probe.unlink()


def _path_literals(path: Path) -> list[str]:
    names = set(architectures.PATHS)
    return [
        f"{path.name}:{node.lineno} spells '{node.value}'"
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]


def test_path_names_are_spelled_only_in_the_spec():
    # a path's name is a plan-file key: one spelling, architectures.P_MD / P_RLD_MD / P_RLD
    spec = PKG / "architectures.py"
    found = [x for p in sorted(PKG.rglob("*.py")) if p != spec for x in _path_literals(p)]
    assert not found, "use architectures' path constants: " + "; ".join(found)


def test_path_literal_detector_sees_keys_and_comparisons(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('X = {"p_md": 1}\nY = f"{X[\'p_rld\']}" == "p_rld_md s"  # "p_rld_md"\n')
    assert _path_literals(probe) == ["probe.py:1 spells 'p_md'", "probe.py:2 spells 'p_rld'"]


def test_path_names_match_the_plan_schema_and_the_replay():
    # the route-share fields of a plan file and the replay's route codes follow PATHS in order
    assert tuple(RouteShare.model_fields) == architectures.PATHS
    assert tuple(r.name.lower() for r in Route) == architectures.PATHS


def test_complexity_at_most_15():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (it is in the test extras)")
    r = subprocess.run(
        [
            ruff,
            "check",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
            "--output-format",
            "concise",
            str(PKG),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_top_level_holds_packages_not_loose_modules():
    loose = sorted(p.name for p in PKG.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 4, f"pdd_plan/ has {len(loose)} top-level modules: {loose}"


def test_no_two_modules_share_a_confusable_name():
    # one model.py (the LLM profile's schema), one tables.py (the MILP's), no queues beside queueing
    names = [p.name for p in PKG.rglob("*.py") if "data" not in p.parts]
    for name in ("model.py", "tables.py", "queueing.py"):
        assert names.count(name) <= 1, f"{names.count(name)} modules named {name}"
    assert not (set(names) >= {"queues.py", "queueing.py"})


def test_the_package_data_holds_no_code():
    """pdd_plan/data/ is data (profiles, examples, calibration rows); scripts live beside the
    study they reproduce (studies/), not in the installed package's data."""
    assert not sorted((PKG / "data").rglob("*.py"))
