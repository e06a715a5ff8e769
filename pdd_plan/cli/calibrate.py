"""Command `calibrate`: fit each GPU's efficiency factors to measured throughput, read from the
repository's measurements CSV or from the result files serving engines write (`--from`)."""

from __future__ import annotations

from pathlib import Path

import typer

from pdd_plan.cli.common import check_format, dumps, echo, flag_names, write_atomic
from pdd_plan.cli.progress import Stages, wanted
from pdd_plan.common.atomic import check_output, note_input
from pdd_plan.common.errors import InputError

# fields the domain code names -> the flags that supply them
FLAGS = {
    "model": "--model",
    "gpu": "--gpu",
    "gpus": "--gpus",
    "tp": "--tp",
    "ep": "--ep",
    "dtype": "--dtype",
    "kv_dtype": "--kv-dtype",
    "input_tokens": "--input-tokens",
    "output_tokens": "--output-tokens",
}


def _check_flags(model, gpu, gpus, tp, ep, dtype, kv_dtype, input_tokens, output_tokens) -> None:
    from pdd_plan.inputs import profiles
    from pdd_plan.perf import layers

    if model is not None:
        profiles.model(model, "--model")
    if gpu is not None:
        profiles.gpu(gpu, "--gpu")
        if gpu not in profiles.bundled_names("gpus"):
            raise InputError(None, "--gpu", f"'{gpu}' is not a bundled GPU", "calibrate by name")
    for v, flag in (
        (gpus, "--gpus"),
        (tp, "--tp"),
        (ep, "--ep"),
        (input_tokens, "--input-tokens"),
        (output_tokens, "--output-tokens"),
    ):
        if v is not None and v < 1:
            raise InputError(None, flag, f"must be >= 1, got {v}", "give a positive number")
    for v, flag in ((dtype, "--dtype"), (kv_dtype, "--kv-dtype")):
        if v is not None and v not in layers.DTYPE_BYTES:
            raise InputError(None, flag, f"unknown dtype '{v}'", "use bf16, fp8 or fp4")


def _targets(gpus: list[str], write: bool, out_dir: Path | None) -> dict[str, Path]:
    """The calibration file each GPU's fit goes to, every one checked before any fit runs:
    the package's own files are inputs (loading a GPU profile reads them), so writing over
    one is refused with the flag that writes elsewhere."""
    from pdd_plan.calibration import fit as cal

    if not write and out_dir is None:
        return {}
    if out_dir is not None and not out_dir.is_dir():
        raise InputError(str(out_dir), "--out-dir", "is not a folder", "create it first")
    folder = out_dir if out_dir is not None else cal.calibration_dir()
    paths = {g: Path(folder) / f"{g}.yaml" for g in gpus}
    for g in gpus:  # what loading the GPU's profile applies, whether or not it was loaded yet
        note_input(cal.calibration_dir() / f"{g}.yaml")
    for path in paths.values():
        try:
            check_output(path, "--out-dir" if out_dir is not None else "--write")
        except InputError as e:
            if out_dir is not None:
                raise
            raise InputError(
                e.file,
                "--write",
                e.problem,
                "give --out-dir DIR to write the fit there (the bundled calibration is read "
                "by this command and is not written over)",
            ) from None
    return paths


def _fit_all(rows, gpus: list[str], targets: dict[str, Path], name: str) -> list[dict]:
    """One joint fit of every row (all GPUs and families: the MoE-vs-dense shift is learned
    across them); the result of each GPU in `gpus`, and its file when `targets` names one
    (written after every fit is done, all or none)."""
    import numpy as np

    from pdd_plan.calibration import fit as cal
    from pdd_plan.calibration import joint, joint_files
    from pdd_plan.calibration.joint_report import at_bound_warnings, fit_summary

    analytic = {g: cal.analytic_gpu(g) for g in sorted({r.gpu for r in rows})}
    jf = joint.fit_joint(rows, analytic)
    before = {r.row: r.error(cal.predict(r, analytic[r.gpu])) for r in rows}
    rows_gpu = {r.row: r.gpu for r in rows}
    results = []
    for g in gpus:
        errs = joint_files.gpu_errors(jf, rows_gpu, g)
        mine = [r.row for r in rows if r.gpu == g]
        entry = {
            "gpu": g,
            "rows": mine,
            "factors": jf.factors(g, "dense"),
            "moe_factors": jf.factors(g, "moe"),
            "moe_basis": jf.basis(g, "moe"),
            "dense_basis": jf.basis(g, "dense"),
            "median_abs_error_analytic": float(np.median(np.abs([before[r] for r in mine]))),
            "median_abs_error_calibrated": float(np.median(np.abs(errs))),
            "max_abs_error_calibrated": float(np.max(np.abs(errs))),
            "converged": jf.success,
            "fit": fit_summary(jf, g),
            "warnings": at_bound_warnings(jf, g, rows_gpu),
        }
        results.append(entry)
    for g, entry in zip(gpus, results):  # all fits done: then the files, all or none
        if g in targets:
            write_atomic(targets[g], joint_files.calibration_yaml(jf, g, rows_gpu, name))
            entry["written"] = str(targets[g])
    return results


def _render(results: list[dict], name: str) -> None:
    from rich.console import Console

    from pdd_plan.report import layout

    cols: tuple[str, ...] = ("gpu", "rows", "mfu", "mbu", "MoE mfu", "MoE mbu", "overhead ms")
    cols += ("median |err|", "max")
    rows = []
    for e in results:
        f = e["factors"]
        rows.append(
            [
                e["gpu"],
                str(len(e["rows"])),
                f"{f['mfu']:.3f}",
                f"{f['mbu']:.3f}",
                f"{e['moe_factors']['mfu']:.3f}",
                f"{e['moe_factors']['mbu']:.3f}",
                f"{f['step_overhead_ms']:.2f}",
                f"{e['median_abs_error_analytic']:.1%} -> {e['median_abs_error_calibrated']:.1%}",
                f"{e['max_abs_error_calibrated']:.1%}",
            ]
        )
    layout.show(Console(), f"calibration fit to {name}", cols, rows)


def calibrate(
    measurements: list[str] = typer.Argument(
        None, help="Measurements CSV (see data/calibration/) or engine result files."
    ),
    from_files: list[str] = typer.Option(
        None,
        "--from",
        help="Engine result file (repeatable; files after it are read too): SGLang "
        "bench_serving --output-file JSONL, vLLM bench serve --save-result JSON, "
        "trtllm-bench throughput --report_json (or its printed report), or the CSV.",
    ),
    model: str = typer.Option(None, "--model", "-m", help="Model of runs whose file omits it."),
    gpu: str = typer.Option(
        None, "--gpu", "-g", help="GPU of runs whose file omits it; fit only this GPU."
    ),
    gpus: int = typer.Option(None, "--gpus", help="GPUs per instance, if the file omits it."),
    tp: int = typer.Option(None, "--tp", help="Tensor parallel size (default: --gpus)."),
    ep: int = typer.Option(None, "--ep", help="Expert parallel size (default: --gpus for MoE)."),
    dp_attention: bool = typer.Option(
        False, "--dp-attention", help="The runs used data-parallel attention."
    ),
    dtype: str = typer.Option(None, "--dtype", help="Weight dtype, if the file omits it."),
    kv_dtype: str = typer.Option(None, "--kv-dtype", help="KV dtype, if the file omits it."),
    input_tokens: int = typer.Option(
        None, "--input-tokens", "-L", help="Mean prompt length, if the file omits it."
    ),
    output_tokens: int = typer.Option(
        None, "--output-tokens", "-O", help="Mean output length, if the file omits it."
    ),
    write: bool = typer.Option(
        False,
        "--write",
        help="Write each fitted GPU's <gpu>.yaml; needs --out-dir (the bundled "
        "calibration files are inputs of this command and are never written over).",
    ),
    out_dir: Path = typer.Option(
        None,
        "--out-dir",
        help="Write <gpu>.yaml into this folder (implies --write).",
    ),
    format: str = typer.Option("table", "--format", "-f", help="table | json | yaml"),
) -> None:
    """Fit mfu, mbu and the step overhead of every GPU and model family
    jointly to measured throughput (the MoE-vs-dense shift partially pooled per GPU)."""
    from pdd_plan.calibration import engine_results as er

    fmt = check_format(format)
    files = [str(f) for f in (measurements or [])] + [str(f) for f in (from_files or [])]
    if not files:
        raise InputError(None, "--from", "no measurements given", "give a CSV or --from FILE")
    _check_flags(model, gpu, gpus, tp, ep, dtype, kv_dtype, input_tokens, output_tokens)
    defaults = er.Defaults(
        model, gpu, gpus, tp, ep, dp_attention, dtype, kv_dtype, input_tokens, output_tokens
    )
    with flag_names(**FLAGS):
        rows, notes = er.read_results(files, defaults)
    name = ", ".join(Path(f).name for f in files)
    found = sorted({r.gpu for r in rows})
    if gpu is not None and gpu not in found:
        raise InputError(
            ", ".join(files),
            "--gpu",
            f"no rows for GPU '{gpu}'",
            f"in the files: {', '.join(found)}",
        )
    fitted = [gpu] if gpu else found
    targets = _targets(fitted, write, out_dir)
    with Stages("calibrate", wanted(fmt)) as bar:
        bar.stage(f"joint fit of {len(rows):,} runs ({', '.join(fitted)})")
        results = _fit_all(rows, fitted, targets, name)
    for n in notes:  # runs left out: on stderr, so that stdout stays the fit
        typer.echo(f"note: {n}", err=True)
    for e in results:
        typer.echo(f"note: {e['gpu']}: {e['fit']}", err=True)
        for w in e["warnings"]:
            typer.echo(f"warning: {w}", err=True)
    if fmt != "table":
        echo(dumps(results, fmt))
        return
    _render(results, name)
    for e in results:
        if "written" in e:
            echo(f"wrote {e['written']}\n")
