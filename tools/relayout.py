"""The layout move: `git mv` every module to its package and rewrite every import and dotted
module name to match (pdd_plan, tests, benchmarks, docs). Run once from the repo root; kept as
the record of what moved where. Imports inside pdd_plan become absolute."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# old dotted module -> new dotted module (packages map their whole subtree)
MOVES = {
    "pdd_plan.errors": "pdd_plan.common.errors",
    "pdd_plan.atomic": "pdd_plan.common.atomic",
    "pdd_plan.limits": "pdd_plan.common.limits",
    "pdd_plan.schema": "pdd_plan.inputs.schema",
    "pdd_plan.profiles": "pdd_plan.inputs.profiles",
    "pdd_plan.resolve": "pdd_plan.inputs.context",
    "pdd_plan.plan_sites": "pdd_plan.inputs.plan_fit",
    "pdd_plan.perf.calibrated": "pdd_plan.inputs.calibrated",
    "pdd_plan.perf.arch": "pdd_plan.perf.layers",
    "pdd_plan.workload.bathtub": "pdd_plan.perf.bathtub",
    "pdd_plan.perf.calibration": "pdd_plan.calibration.fit",
    "pdd_plan.perf.measurements": "pdd_plan.calibration.measurements",
    "pdd_plan.perf.readings": "pdd_plan.calibration.readings",
    "pdd_plan.perf.engine_formats": "pdd_plan.calibration.engine_formats",
    "pdd_plan.perf.engine_results": "pdd_plan.calibration.engine_results",
    "pdd_plan.perf.error_band": "pdd_plan.calibration.error_band",
    "pdd_plan.perf.pooled": "pdd_plan.calibration.pooled",
    "pdd_plan.perf.hf_import": "pdd_plan.calibration.hf_import",
    "pdd_plan.network_calibrate": "pdd_plan.calibration.iperf3",
    "pdd_plan.pipeline": "pdd_plan.latency.paths",
    "pdd_plan.queueing": "pdd_plan.latency.closed_forms",
    "pdd_plan.lindley": "pdd_plan.latency.prefill.gig1",
    "pdd_plan.mgc_wait": "pdd_plan.latency.prefill.gigc",
    "pdd_plan.network": "pdd_plan.latency.line.transfer",
    "pdd_plan.tcp": "pdd_plan.latency.line.tcp",
    "pdd_plan.tagged_transfer": "pdd_plan.latency.line.tagged",
    "pdd_plan.line_delay": "pdd_plan.latency.line.delay_shape",
    "pdd_plan.line_law": "pdd_plan.latency.line.law",
    "pdd_plan.line_input": "pdd_plan.latency.line.input_stream",
    "pdd_plan.line_found": "pdd_plan.latency.line.found_work",
    "pdd_plan.line_bursts": "pdd_plan.latency.line.bursts",
    "pdd_plan.optimize.model": "pdd_plan.optimize.milp",
    "pdd_plan.optimize.metrics": "pdd_plan.optimize.summary",
    "pdd_plan.optimize.arch_plan": "pdd_plan.optimize.solved",
    "pdd_plan.optimize.planner": "pdd_plan.optimize.search",
    "pdd_plan.optimize.fixed_rate": "pdd_plan.optimize.search.fixed_rate",
    "pdd_plan.optimize.free_rate": "pdd_plan.optimize.search.free_rate",
    "pdd_plan.optimize.enumeration": "pdd_plan.optimize.search.enumeration",
    "pdd_plan.optimize.objectives": "pdd_plan.optimize.search.objectives",
    "pdd_plan.optimize.caps": "pdd_plan.optimize.search.caps",
    "pdd_plan.optimize.owned": "pdd_plan.optimize.search.owned",
    "pdd_plan.optimize.bruteforce": "benchmarks.oracles.bruteforce",
    "pdd_plan.optimize.sweep": "pdd_plan.sweep.run",
    "pdd_plan.optimize.sweep_executors": "pdd_plan.sweep.executors",
    "pdd_plan.optimize.sweep_points": "pdd_plan.sweep.points",
    "pdd_plan.optimize.sweep_rows": "pdd_plan.sweep.rows",
    "pdd_plan.optimize.pareto": "pdd_plan.sweep.pareto",
    "pdd_plan.regimes": "pdd_plan.sweep.regimes",
    "pdd_plan.sim.tables": "pdd_plan.sim.timings",
    "pdd_plan.sim.decode": "pdd_plan.sim.decode.decoder",
    "pdd_plan.sim.decode_io": "pdd_plan.sim.decode.io",
    "pdd_plan.sim.decode_kernel": "pdd_plan.sim.decode.kernel",
    "pdd_plan.sim.decode_state": "pdd_plan.sim.decode.state",
    "pdd_plan.sim.kernel_heaps": "pdd_plan.sim.decode.heaps",
    "pdd_plan.report.model": "pdd_plan.report.sections",
    "pdd_plan.workload.traces": "pdd_plan.workload.traces",
    "pdd_plan.workload.trace_azure": "pdd_plan.workload.traces.azure",
    "pdd_plan.workload.trace_classes": "pdd_plan.workload.traces.classes",
    "pdd_plan.workload.trace_generic": "pdd_plan.workload.traces.generic",
    "pdd_plan.workload.trace_hits": "pdd_plan.workload.traces.hits",
    "pdd_plan.workload.trace_mooncake": "pdd_plan.workload.traces.mooncake",
    "pdd_plan.workload.trace_reader": "pdd_plan.workload.traces.reader",
    "pdd_plan.workload.trace_rows": "pdd_plan.workload.traces.rows",
    "pdd_plan.workload.trace_scan": "pdd_plan.workload.traces.scan",
    "pdd_plan.workload.trace_seen": "pdd_plan.workload.traces.seen",
    "pdd_plan.workload.trace_ticks": "pdd_plan.workload.traces.ticks",
}
PACKAGE_INIT = {  # modules that become a package's __init__
    "pdd_plan.optimize.planner",
    "pdd_plan.workload.traces",
}
NEW_PACKAGES = [
    "pdd_plan/common",
    "pdd_plan/inputs",
    "pdd_plan/calibration",
    "pdd_plan/latency",
    "pdd_plan/latency/prefill",
    "pdd_plan/latency/line",
    "pdd_plan/sweep",
    "pdd_plan/sim/decode",
    "benchmarks",
    "benchmarks/oracles",
]
_U = "unit/"
TEST_MOVES = {  # tests/<old> -> tests/<new>: by package, named for what they test
    "test_atomic.py": _U + "common/test_atomic.py",
    "test_limits.py": _U + "common/test_limits.py",
    "test_code_gates.py": _U + "common/test_code_gates.py",
    "test_profiles.py": _U + "inputs/test_profiles.py",
    "test_plan_schema.py": _U + "inputs/test_plan_schema.py",
    "test_perf.py": _U + "perf/test_perf.py",
    "test_perf_v2.py": _U + "perf/test_moe_terms.py",
    "test_models_unit.py": _U + "perf/test_hand_arithmetic.py",
    "test_engine_results.py": _U + "calibration/test_engine_results.py",
    "test_error_band.py": _U + "calibration/test_error_band.py",
    "test_pooled.py": _U + "calibration/test_pooled.py",
    "test_h200_kernels.py": _U + "calibration/test_h200_kernels.py",
    "test_line_calibrate.py": _U + "calibration/test_iperf3.py",
    "test_lindley.py": _U + "latency/test_prefill_gig1.py",
    "test_mgc_wait.py": _U + "latency/test_prefill_gigc.py",
    "test_pipeline.py": _U + "latency/test_paths.py",
    "test_line_bursts.py": _U + "latency/test_line_bursts.py",
    "test_line_delay.py": _U + "latency/test_line_delay_shape.py",
    "test_line_found.py": _U + "latency/test_line_found_work.py",
    "test_line_input.py": _U + "latency/test_line_input_stream.py",
    "test_line_model.py": _U + "latency/test_line_tcp_pool.py",
    "test_tagged_transfer.py": _U + "latency/test_line_tagged.py",
    "test_kv_transfer_law.py": _U + "latency/test_kv_transfer_law.py",
    "test_bursty.py": _U + "latency/test_bursty_arrivals.py",
    "test_operating_step.py": _U + "latency/test_operating_step.py",
    "test_singular_split.py": _U + "latency/test_singular_split.py",
    "test_owned.py": _U + "optimize/test_owned.py",
    "test_planner_free_rate.py": _U + "optimize/test_free_rate.py",
    "test_planner_paths.py": _U + "optimize/test_relay_paths.py",
    "test_diagnosis.py": _U + "optimize/test_diagnosis.py",
    "test_verify.py": _U + "optimize/test_verify.py",
    "test_optimizer.py": _U + "optimize/test_optimizer.py",
    "test_sim_kernel.py": _U + "sim/test_sim_kernel.py",
    "test_sim_queues.py": _U + "sim/test_sim_queues.py",
    "test_sim_states.py": _U + "sim/test_sim_states.py",
    "test_sim_tables.py": _U + "sim/test_sim_timings.py",
    "test_sim_warmup.py": _U + "sim/test_sim_warmup.py",
    "test_workload_traces.py": _U + "workload/test_workload_traces.py",
    "test_trace_fast_paths.py": _U + "workload/test_trace_fast_paths.py",
    "test_sweep.py": _U + "sweep/test_sweep.py",
    "test_regimes.py": _U + "sweep/test_regimes.py",
    "test_emit_moe.py": _U + "emit/test_emit_moe.py",
    "test_tables_width.py": _U + "report/test_tables_width.py",
    "test_evaluate.py": _U + "evaluate/test_evaluate.py",
    "test_cli_errors.py": "integration/test_cli_errors.py",
    "test_hostile_input.py": "integration/test_hostile_input.py",
    "test_hostile_output.py": "integration/test_hostile_output.py",
    "test_sim_cli.py": "integration/test_sim_cli.py",
    "test_sim_run.py": "integration/test_sim_run.py",
    "test_workload_cli.py": "integration/test_workload_cli.py",
    "test_determinism.py": "integration/test_determinism.py",
    "test_mutation.py": "integration/test_mutation.py",
    "test_serving_checks.py": "integration/test_serving_checks.py",
    "test_reproduction.py": "integration/test_reproduction.py",
    "test_fourth_architecture.py": "integration/test_new_architecture.py",
    "test_emit.py": "integration/test_emit.py",
    "test_report.py": "integration/test_report.py",
    "test_objectives.py": "integration/test_objectives.py",
    "test_convergence.py": "integration/test_class_convergence.py",
    "test_golden.py": "golden/test_golden.py",
}
NAME_RENAMES = [  # whole-word identifier renames in every .py file
    (r"\bArchPlan\b", "SolverResult"),
    (r"jitter", "line_wait"),
]


def sh(*args: str) -> None:
    subprocess.run(args, check=True, cwd=ROOT)


def modules(pkg_root: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(pkg_root.rglob("*.py")):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


OLD_MODULES = modules(ROOT / "pdd_plan")


def new_name(old: str) -> str:
    """The new dotted name of a module (or of anything under it)."""
    best = max((k for k in MOVES if old == k or old.startswith(k + ".")), key=len, default=None)
    if best is None:
        return old
    return MOVES[best] + old[len(best) :]


def new_path(old: str) -> Path:
    new = new_name(old)
    is_pkg = OLD_MODULES[old].name == "__init__.py" or old in PACKAGE_INIT
    rel = Path(*new.split("."))
    return ROOT / (rel / "__init__.py" if is_pkg else rel.with_suffix(".py"))


def absolute(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def identifiers(tree: ast.AST) -> set[str]:
    """Names bound or read in a module (not attributes, not text in strings)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
    return out


def _mark(module: str) -> str:
    return "PDDNEW" + module[len("pdd_plan") :] if module.split(".")[0] == "pdd_plan" else module


def unmark(path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    if "PDDNEW" in src:
        path.write_text(src.replace("PDDNEW", "pdd_plan"), encoding="utf-8")


def rewrite_imports(path: Path, module: str | None) -> None:
    """Every `from X import a, b` naming a pdd_plan module is written anew at its new place
    (absolute), one statement per new parent; a module imported by name whose leaf changes is
    renamed where it is used, unless the new name is taken in the file (then aliased)."""
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    is_pkg = path.name == "__init__.py"
    names = identifiers(tree)
    edits = []  # (start line, end line, text)
    renames: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = absolute(module or "", is_pkg, node)
        if not (base == "pdd_plan" or base.startswith("pdd_plan.")):
            continue
        groups: dict[str, list[str]] = {}
        for a in node.names:
            sub = f"{base}.{a.name}"
            if sub in OLD_MODULES:  # a module imported by name
                nsub = new_name(sub)
                parent, leaf = nsub.rsplit(".", 1)
                local = a.asname or a.name
                if a.asname is None and leaf != a.name:
                    taken = leaf in names
                    if taken:
                        alias = f"{parent.rsplit('.', 1)[-1]}_{leaf}"
                        groups.setdefault(parent, []).append(f"{leaf} as {alias}")
                        renames[local] = alias
                    else:
                        groups.setdefault(parent, []).append(leaf)
                        renames[local] = leaf
                else:
                    groups.setdefault(parent, []).append(
                        leaf if a.asname is None else f"{leaf} as {a.asname}"
                    )
            else:
                nb = new_name(base)
                groups.setdefault(nb, []).append(
                    a.name if a.asname is None else f"{a.name} as {a.asname}"
                )
        indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)
        span = lines[node.lineno - 1 : node.end_lineno]
        notes = sorted({c.strip() for ln in span for c in re.findall(r"#.*$", ln)})
        note = ("  " + "; ".join(notes)) if notes else ""
        # PDDNEW marks a name already moved, so the dotted-name pass does not move it again
        text = "".join(
            f"{indent}from {_mark(m)} import {', '.join(ns)}{note}\n" for m, ns in groups.items()
        )
        edits.append((node.lineno, node.end_lineno, text))
    for start, end, text in sorted(edits, reverse=True):
        lines[start - 1 : end] = [text]
    out = "".join(lines)
    for old, new in renames.items():
        # `old.attr` uses of the module; not `x.old.attr` and not inside longer names
        out = re.sub(rf"(?<![\w.]){re.escape(old)}\.(?=[A-Za-z_])", f"{new}.", out)
        # bare uses as a value (monkeypatch.setattr(network, ...), getattr(pipeline, ...))
        out = re.sub(rf"(?<=[(\[, ]){re.escape(old)}(?=\s*[,)\]])", new, out)
    path.write_text(out, encoding="utf-8")


def rewrite_dotted(path: Path) -> None:
    """Dotted module names in text (import lines, strings, docs), longest first."""
    src = path.read_text(encoding="utf-8")
    keys = sorted(MOVES, key=len, reverse=True)
    pat = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, keys)) + r")(?![\w])")
    out = pat.sub(lambda m: MOVES[m.group(1)], src)  # one pass: a new name is not moved again
    if out != src:
        path.write_text(out, encoding="utf-8")


def rename_names(path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    out = src
    for pat, rep in NAME_RENAMES:
        out = re.sub(pat, rep, out)
    if out != src:
        path.write_text(out, encoding="utf-8")


def main() -> None:
    py_files = [
        p for d in ("pdd_plan", "tests", "benchmarks") for p in sorted((ROOT / d).rglob("*.py"))
    ]
    mod_of = {p: m for m, p in OLD_MODULES.items()}
    for p in py_files:
        rewrite_imports(p, mod_of.get(p))
    text_files = py_files + [ROOT / "README.md", ROOT / "BENCHMARKS.md"]
    text_files += sorted((ROOT / "docs").glob("*.md"))
    for p in text_files:
        rewrite_dotted(p)
    for p in py_files:
        unmark(p)
        rename_names(p)
        for skipped in rename_cls(p):
            print("cls kept:", skipped, file=sys.stderr)
    for d in NEW_PACKAGES:
        (ROOT / d).mkdir(parents=True, exist_ok=True)
    moves = []
    for old in OLD_MODULES:
        src, dst = OLD_MODULES[old], new_path(old)
        if src != dst:
            moves.append((src, dst))
    for src, dst in moves:
        dst.parent.mkdir(parents=True, exist_ok=True)
        sh("git", "mv", str(src.relative_to(ROOT)), str(dst.relative_to(ROOT)))
    for d in NEW_PACKAGES:
        init = ROOT / d / "__init__.py"
        if not init.exists():
            init.write_text("", encoding="utf-8")
            sh("git", "add", str(init.relative_to(ROOT)))
    for old, new in TEST_MOVES.items():
        dst = ROOT / "tests" / new
        dst.parent.mkdir(parents=True, exist_ok=True)
        sh("git", "mv", f"tests/{old}", f"tests/{new}")
    print(f"{len(moves)} modules and {len(TEST_MOVES)} test files moved", file=sys.stderr)


def rename_cls(path: Path) -> list[str]:
    """A request-classes parameter named `cls` (not a classmethod's) becomes `classes` in its
    function; returns the functions left alone because `classes` is taken there."""
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    spans, skipped = [], []
    in_class = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
    for f in ast.walk(tree):
        if not isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = [a.arg for a in f.args.posonlyargs + f.args.args + f.args.kwonlyargs]
        if "cls" not in args:
            continue
        decos = ast.unparse(f.decorator_list) if f.decorator_list else ""
        if id(f) in in_class and args[0] == "cls" or "classmethod" in decos or "validator" in decos:
            continue
        names = {n.id for n in ast.walk(f) if isinstance(n, ast.Name)} | set(args)
        if "classes" in names:
            skipped.append(f"{path.name}:{f.lineno} {f.name}")
            continue
        spans.append((f.lineno, f.end_lineno))
    # outermost spans only (a nested function is inside its parent's span)
    spans = [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)]
    for a, b in spans:
        for i in range(a - 1, b):
            lines[i] = re.sub(r"\bcls\b", "classes", lines[i])
    path.write_text("".join(lines), encoding="utf-8")
    return skipped


if __name__ == "__main__":
    main()
