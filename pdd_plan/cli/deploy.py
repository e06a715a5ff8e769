"""`pdd-plan emit` (deployment files from a plan) and `pdd-plan report` (a plan for people)."""

from __future__ import annotations

from pathlib import Path

import typer

from pdd_plan.cli.common import check_format, console, dumps, echo, guarded
from pdd_plan.common import limits
from pdd_plan.common.atomic import check_output
from pdd_plan.common.errors import InputError

REPORT_FORMATS = ("table", "json", "markdown")


def _writable_parent(path: Path, option: str) -> None:
    """Before any work: not a folder, a device, a pipe (/dev/stdout) or an input."""
    if path.is_dir():
        raise InputError(str(path), option, "is a folder", "give a file name")
    check_output(path, option)


@guarded
def emit_cmd(
    plan: str = typer.Argument(..., help="Plan YAML from `pdd-plan optimize --out`."),
    target: str = typer.Option(
        ...,
        "--target",
        "-t",
        help="sglang | lws | rbg | disaggregatedset | dynamo | llm-d | kserve",
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to write into (created if missing)."),
    architecture: str = typer.Option("pdd", "--architecture", "-a", help="pdd | cdc_pd | idc_pd"),
    model_path: str = typer.Option(
        None, "--model-path", help="--model-path for SGLang (default: the model's HF id)."
    ),
    check: bool = typer.Option(
        False,
        "--check",
        help="Validate what was written: Kubernetes documents against the vendored CRD schemas "
        "(strict), SGLang command lines against the flag table.",
    ),
    image: str = typer.Option(
        None,
        "--image",
        help="Container image (default: lmsysorg/sglang:latest; dynamo: its runtime image for "
        "the engine; kserve: the preset's).",
    ),
    transfer_backend: str = typer.Option(
        "nixl",
        "--transfer-backend",
        help="nixl (per peer: RDMA in a datacenter, TCP across) | mooncake (TCP where KV "
        "crosses the line) | mooncake_tcp",
    ),
    ib_device: str = typer.Option(
        "mlx5_0", "--ib-device", help="--disaggregation-ib-device where KV moves over RDMA."
    ),
    trust_remote_code: bool = typer.Option(
        False, "--trust-remote-code", help="Pass --trust-remote-code (DeepSeek/Kimi need it)."
    ),
    engine: str = typer.Option("sglang", "--engine", help="dynamo: sglang | vllm | trtllm"),
    engine_version: str = typer.Option(
        None, "--engine-version", help="The engine version whose flag table checks the flags."
    ),
    api_version: str = typer.Option(
        "v1beta1", "--api-version", help="dynamo: v1beta1 | v1alpha1 (nvidia.com)"
    ),
    dynamo_topology: str = typer.Option(
        "one-cluster",
        "--dynamo-topology",
        help="dynamo across datacenters: one-cluster (one DGD) | per-datacenter (a control DGD "
        "and one DGD per pool).",
    ),
) -> None:
    """Deployment files for one architecture of a plan: SGLang launch scripts and router,
    Kubernetes LeaderWorkerSet / RoleBasedGroup / DisaggregatedSet manifests per datacenter,
    NVIDIA Dynamo DynamoGraphDeployments, llm-d InferencePools and router config, or a KServe
    LLMInferenceService."""
    from pdd_plan import emit as em
    from pdd_plan.emit.plan import EmitOptions, context
    from pdd_plan.outputs.placement import check_sites

    em.check_target(target)
    opts = EmitOptions(
        model_path=model_path,
        image=image,
        transfer_backend=transfer_backend,
        ib_device=ib_device,
        trust_remote_code=trust_remote_code,
        engine="vllm" if target == "kserve" else engine,
        engine_version=engine_version,
        api_version=api_version,
        topology=dynamo_topology,
    )
    data = em.load_plan(plan)
    from pdd_plan.emit.plan import arch_plan

    arch_plan(data, architecture, plan)  # a missing architecture fails before any work
    ctx = context(data, plan)
    check_sites(data, ctx.sites, architecture, plan)  # a plan that is not its scenario's: refused
    day = data.day is not None and architecture in data.day.architectures
    if day:  # a day: every group at the day's most instances, scaled by the schedule
        from pdd_plan.emit.schedule import peak_plan

        data = peak_plan(data, architecture)
    dep = em.build(
        data, architecture, opts, model=ctx.model, gpus=ctx.gpus, file=plan, lines=ctx.lines
    )
    # everything in memory before anything is written
    files = em.render_day(dep, target, data) if day else em.render(dep, target)
    folder = em.prepare_dir(out)
    old = em.stale(folder, sorted(files))
    em.write(folder, files)
    echo(f"wrote {len(files)} files to {folder}: {', '.join(sorted(files))}\n")
    if old:
        echo(f"removed {len(old)} files an earlier emit wrote there: {', '.join(old)}\n")
    if check:
        res = em.check_dir(folder, sorted(files), em.selection(dep, target))
        if res["problems"]:
            for p in res["problems"][:20]:
                typer.echo(f"  {p}", err=True)
            raise em.CheckFailed(
                f"check failed: {len(res['problems'])} problem(s) in the files written to {folder}"
            )
        echo(
            f"check ok: {res['documents']} documents valid against their schemas (strict), "
            f"{res['command_lines']} engine command lines valid against the flag tables\n"
        )


@guarded
def report_cmd(
    plan: str = typer.Argument(..., help="Plan YAML from `pdd-plan optimize --out`."),
    format: str = typer.Option("table", "--format", "-f", help="table | json | markdown"),
    html: Path = typer.Option(
        None, "--html", help="Also write one self-contained HTML page with plots here."
    ),
    plots: Path = typer.Option(
        None, "--plots", help="Also write each plot as a PNG into this folder."
    ),
    sim_requests: int = typer.Option(
        3000,
        "--sim-requests",
        help="Requests per architecture replayed for the plots when the plan has no "
        "verification replay to draw them from (a plan made with --no-verify, or a day's).",
    ),
    regimes: bool = typer.Option(
        True,
        "--regimes/--no-regimes",
        help="With --html/--plots: add a 5x5 regime map (where PDD pays) around the plan's "
        "point, 25 cells optimized without verification (seconds).",
    ),
) -> None:
    """Inputs recap, the plan per architecture, costs, analytic and simulated percentiles,
    binding constraints; --html adds plots (TTFT CDF, prefix hits, bathtub, costs, line use)."""
    from pdd_plan import emit as em
    from pdd_plan.emit.plan import context
    from pdd_plan.report.sections import build_report

    fmt = check_format(format, REPORT_FORMATS)
    if sim_requests < 100:
        raise InputError(
            None, "--sim-requests", f"must be >= 100 (got {sim_requests})", "use a few thousand"
        )
    limits.check("REQUESTS", sim_requests, None, "--sim-requests")
    data = em.load_plan(plan)  # first: an output over the plan is refused below
    if html is not None:
        _writable_parent(html, "--html")
    if plots is not None and plots.exists() and not plots.is_dir():
        raise InputError(str(plots), "--plots", "exists and is not a folder", "give a folder")
    rep = build_report(data)
    figures = []
    if html is not None or plots is not None:
        # the replays, bathtub and regime map; they pull in the simulator and matplotlib
        from pdd_plan.cli.figure_data import figure_data
        from pdd_plan.cli.progress import Stages, wanted
        from pdd_plan.report.figures import build_figures

        with Stages("report", wanted(fmt)) as bar:
            ctx = context(data, plan)
            fd = figure_data(data, ctx, sim_requests, regimes=regimes, bar=bar)
            bar.stage("plots")
            figures = build_figures(data, fd)
    if plots is not None:
        folder = em.prepare_dir(plots)
        em.write(folder, {f"{f.key}.png": em.File(f.png) for f in figures}, manifest=False)
    if html is not None:
        from pdd_plan.report.html import render_html

        em.write(
            html.parent if str(html.parent) else Path("."),
            {html.name: em.File(render_html(rep, figures, data))},
            manifest=False,
        )
    if fmt == "table":
        from pdd_plan.report.render import render_rich

        render_rich(rep, console())
    elif fmt == "markdown":
        from pdd_plan.report.render import markdown

        echo(markdown(rep))
    else:
        echo(dumps(rep.to_dict(), "json"))


def register(app: typer.Typer) -> None:
    app.command("emit")(emit_cmd)
    app.command("report")(report_cmd)
