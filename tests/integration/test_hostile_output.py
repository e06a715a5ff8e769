"""Outputs never destroy inputs or special files, and emit's silent mistakes are refused.

Issue 11: `optimize X --out X` overwrote the scenario, `--out /dev/full` (as root) replaced the
device node, `> /dev/full` ended in "internal error", two datacenters `dc-a` and `DC_A` made
`emit` write one datacenter's files over the other's, `emit --check` let a `--tp-size` pass
that does not match the instance's GPUs, and a plan whose fleet is not its scenario's was
replayed and deployed. Every case here is a one-line error with exit 2 (or a check problem),
with the input untouched.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml

from pdd_plan import emit
from pdd_plan.cli.common import guarded
from pdd_plan.cli.main import app
from pdd_plan.common import atomic
from pdd_plan.common.atomic import atomic_open, check_output, note_input, write_atomic
from pdd_plan.common.errors import InputError
from pdd_plan.emit import flags, sglang
from pdd_plan.emit.plan import build, dns
from pdd_plan.inputs.schema.io import read_yaml
from pdd_plan.outputs.plan import parse_plan
from tests.cli_helpers import runner

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_PLAN = ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"
SCENARIO = ROOT / "pdd_plan" / "data" / "examples" / "pdd-paper.yaml"


@pytest.fixture(autouse=True)
def _fresh_inputs():
    atomic.forget_inputs()
    yield
    atomic.forget_inputs()


def invoke(*args: object, application: typer.Typer = app):
    return runner().invoke(application, [str(a) for a in args])


def err_line(r) -> str:
    """The single `error: ...` line of a failed command (no traceback, no internal error)."""
    text = (r.stderr if hasattr(r, "stderr") else r.output).strip()
    assert "Traceback" not in text and "internal" not in text, text
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    return lines[0]


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def plan_dict() -> dict:
    return yaml.safe_load(GOLDEN_PLAN.read_text(encoding="utf-8"))


def write_plan(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


# ------------------------------------------------------------------ inputs are never outputs
def test_optimize_out_onto_its_scenario_is_refused_before_work(tmp_path):
    sc = tmp_path / "s.yaml"
    shutil.copy(SCENARIO, sc)
    before = digest(sc)
    r = invoke("optimize", sc, "--out", sc)
    assert r.exit_code == 2
    assert "is an input of this command" in err_line(r)
    assert digest(sc) == before


def test_a_symlink_or_hard_link_to_an_input_is_the_input(tmp_path):
    sc = tmp_path / "s.yaml"
    shutil.copy(SCENARIO, sc)
    (tmp_path / "soft.yaml").symlink_to(sc)
    os.link(sc, tmp_path / "hard.yaml")
    read_yaml(sc)
    for name in ("s.yaml", "soft.yaml", "hard.yaml"):
        with pytest.raises(InputError, match="is an input"):
            write_atomic(tmp_path / name, "x: 1\n")
    assert (tmp_path / "soft.yaml").is_symlink()
    write_atomic(tmp_path / "other.yaml", "x: 1\n")  # anything else is fine


def test_every_reader_of_user_files_notes_its_input(tmp_path):
    from pdd_plan.calibration.fit import read_measurements
    from pdd_plan.workload.traces.reader import TraceReader

    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n0,10,5\n1,20,5\n")
    assert sum(len(c) for c in TraceReader(trace)) == 2
    csv = tmp_path / "m.csv"
    csv.write_text("source,hardware\n")
    with pytest.raises(InputError, match="missing columns"):
        read_measurements(csv)
    for p in (trace, csv):
        with pytest.raises(InputError, match="is an input"):
            check_output(p)
    atomic.forget_inputs()  # a new command: nothing read yet
    check_output(trace)


def test_simulate_records_onto_the_trace_is_refused(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n0,1000,50\n0.5,2000,80\n")
    before = digest(trace)
    r = invoke("simulate", GOLDEN_PLAN, "--trace", trace, "--records", trace)
    assert r.exit_code == 2
    assert "--records" in err_line(r) and "is an input" in err_line(r)
    assert digest(trace) == before


def test_emit_into_the_folder_that_holds_the_plan_writes_nothing(tmp_path):
    plan = write_plan(tmp_path / "pdd-routing.yaml", plan_dict())  # a name emit writes
    before = digest(plan)
    r = invoke("emit", plan, "--target", "sglang", "--out", tmp_path)
    assert r.exit_code == 2
    assert "pdd-routing.yaml" in err_line(r) and "is an input" in err_line(r)
    assert digest(plan) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pdd-routing.yaml"]  # no half-emit


def test_emit_checks_every_target_before_writing_any(tmp_path):
    out = tmp_path / "out"
    (out / "pdd-routing.yaml").mkdir(parents=True)  # sorts after launch-*.sh and README.md
    r = invoke("emit", GOLDEN_PLAN, "--target", "sglang", "--out", out)
    assert r.exit_code == 2
    assert "is a folder" in err_line(r)
    assert sorted(p.name for p in out.iterdir()) == ["pdd-routing.yaml"]


# ------------------------------------------------------------------ links and special files
def test_write_goes_through_a_symlink_and_keeps_it(tmp_path):
    target = tmp_path / "real.yaml"
    target.write_text("old\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    write_atomic(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    dangling = tmp_path / "dangling.yaml"
    dangling.symlink_to(tmp_path / "made.yaml")
    write_atomic(dangling, "made\n")
    assert dangling.is_symlink() and (tmp_path / "made.yaml").read_text() == "made\n"


def _special_files(tmp_path: Path) -> list[tuple[Path, str]]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()
    out = [(fifo, "FIFO"), (sock, "socket"), (tmp_path, "folder")]
    out += [(Path(d), "character device") for d in ("/dev/null", "/dev/full") if Path(d).exists()]
    return out


def test_special_files_are_refused_and_left_alone(tmp_path):
    for path, kind in _special_files(tmp_path):
        mode = os.stat(path).st_mode
        with pytest.raises(InputError, match=kind):
            write_atomic(path, "x\n")
        assert os.stat(path).st_mode == mode  # still the FIFO / device / folder it was
    link = tmp_path / "to-null"
    link.symlink_to("/dev/null")  # through a link too
    with pytest.raises(InputError, match="character device"):
        write_atomic(link, "x\n")
    assert link.is_symlink()


def test_cli_out_to_devices_fifo_folder_or_missing_folder_is_one_line(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [
        (fifo, "FIFO"),
        ("/dev/null", "character device"),
        (tmp_path, "is a folder"),
        (tmp_path / "no" / "plan.yaml", "folder does not exist"),
        (tmp_path / "fifo" / "plan.yaml", "fifo' is not a folder"),
    ]
    for out, words in cases:
        r = invoke("optimize", SCENARIO, "--no-verify", "--out", out)
        assert r.exit_code == 2, (out, r.output)
        assert words in err_line(r)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_folder_is_one_line(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(InputError, match="not writable"):
            write_atomic(ro / "x.txt", "x")
    finally:
        ro.chmod(0o755)


# ------------------------------------------------------------------ full disks
def test_a_full_disk_while_writing_is_one_input_error_and_keeps_the_old_file(tmp_path):
    p = tmp_path / "plan.yaml"
    p.write_text("old\n")
    with pytest.raises(InputError, match="No space left"), atomic_open(p) as f:
        f.write("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert p.read_text() == "old\n"
    assert [x.name for x in tmp_path.iterdir()] == ["plan.yaml"]


def test_printing_to_a_full_disk_is_exit_2_not_internal():
    mini = typer.Typer()

    @mini.command()
    @guarded
    def show() -> None:  # what rich's console does: write sys.stdout itself
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    r = invoke(application=mini)
    assert r.exit_code == 2
    assert "standard output: cannot write" in err_line(r)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_stdout_to_dev_full_from_a_real_process():
    exe = shutil.which("pdd-plan") or str(Path(sys.executable).parent / "pdd-plan")
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [exe, "profiles", "list"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60
        )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], r.stderr


# ------------------------------------------------------------------ emit: names that collide
def test_datacenters_that_share_a_dns_label_are_refused_naming_both(tmp_path):
    d = plan_dict()
    text = yaml.safe_dump(d, sort_keys=False).replace("dc-b", "DC_A")
    assert dns("DC_A") == dns("dc-a")
    plan = tmp_path / "plan.yaml"
    plan.write_text(text)
    r = invoke("emit", plan, "--target", "lws", "--out", tmp_path / "out")
    assert r.exit_code == 2
    line = err_line(r)
    # the plan's scenario (its inputs) is refused by the schema, as validate refuses it
    assert "'dc-a'" in line and "'DC_A'" in line and "inputs" in line and "normalised" in line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    with pytest.raises(InputError, match="one name once normalised"):
        build(parse_plan(yaml.safe_load(text)), "pdd")


# ------------------------------------------------------------------ emit --check: --tp-size
def _rendered(target: str) -> dict[str, str]:
    dep = emit.build(parse_plan(plan_dict()), "pdd")
    return {n: f.text for n, f in emit.render(dep, target).items()}


@pytest.mark.parametrize("target", ["sglang", "lws", "rbg"])
def test_check_rejects_a_tp_size_that_is_not_the_instances_gpus(target):
    files = _rendered(target)
    assert emit.check(files)["problems"] == []
    bad = {
        n: t.replace("--tp-size 16", "--tp-size 8").replace("--tp-size=16", "--tp-size=8")
        for n, t in files.items()
    }
    problems = emit.check(bad)["problems"]
    assert problems and all("--tp-size 8 does not match the instance's GPUs" in p for p in problems)
    assert all(p.endswith("16 GPUs)") for p in problems)  # 2 nodes x 8 GPUs


def test_check_gpus_by_hand():
    argv = [*sglang.SERVER, "--model-path", "m", "--tp-size", "16", "--nnodes", "2"]
    assert flags.check_gpus(argv, 8, 1) == []  # 2 nodes from --nnodes x 8 per pod
    assert flags.check_gpus(argv, 4, 1)  # 2 x 4 = 8 GPUs for tp 16
    var = [*sglang.SERVER, "--tp-size=16", "--nnodes=$(LWS_GROUP_SIZE)"]
    assert flags.check_gpus(var, 8, 2) == []  # the group size from the LeaderWorkerSet
    assert flags.check_gpus(var, 8, 1)
    pp = [*sglang.SERVER, "--tp-size", "4", "--pp-size", "2"]
    assert flags.check_gpus(pp, 8, 1, per_instance=True) == []
    assert flags.check_gpus([*sglang.ROUTER, "--pd-disaggregation"], 8, 1) == []


def test_emit_check_on_the_cli_fails_a_wrong_tp_size(tmp_path, monkeypatch):
    real = sglang.server_flags

    def wrong_tp(dep, g):
        return [(f, ("3",) if f == "--tp-size" else v) for f, v in real(dep, g)]

    monkeypatch.setattr(sglang, "server_flags", wrong_tp)
    r = invoke("emit", GOLDEN_PLAN, "--target", "sglang", "--out", tmp_path / "o", "--check")
    assert r.exit_code == 1
    assert "--tp-size 3 does not match" in (r.stderr if hasattr(r, "stderr") else r.output)


# ------------------------------------------------------------------ plans not of their scenario
def _edited(tmp_path: Path, edit) -> Path:
    d = copy.deepcopy(plan_dict())
    edit(d)
    return write_plan(tmp_path / "plan.yaml", d)


def _main_decode(d: dict) -> dict:
    return next(g for g in d["plans"]["pdd"]["instances"] if g["role"] == "main_decode")


def _gpu_not_in_dc(d):
    _main_decode(d)["gpu"] = "h100"  # dc-b lists only h200


def _role_in_wrong_dc(d):
    g = _main_decode(d)
    g["gpu"], g["datacenter"] = "h100", "dc-a"  # dc-a has h100, but main decode sits in dc-b


def _more_gpus_than_the_dc_has(d):
    _main_decode(d)["count"] = 100  # 100 x 32 h200 in a datacenter with 256


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        (_gpu_not_in_dc, ".gpu", "has no 'h100' GPUs"),
        (_role_in_wrong_dc, ".datacenter", "places pdd's main_decode in dc-b, not 'dc-a'"),
        (_more_gpus_than_the_dc_has, "plans.pdd.instances", "uses 3200 h200 GPUs"),
    ],
)
def test_emit_and_simulate_refuse_a_plan_that_is_not_its_scenarios(tmp_path, edit, field, words):
    plan = _edited(tmp_path, edit)
    for args in (
        ("emit", plan, "--target", "sglang", "--out", tmp_path / "out"),
        ("simulate", plan, "--requests", "100"),
    ):
        r = invoke(*args)
        assert r.exit_code == 2, r.output
        line = err_line(r)
        assert str(plan) in line and field in line and words in line, line
    assert not (tmp_path / "out").exists()


def test_the_golden_plan_fits_its_scenario():
    from pdd_plan.emit.plan import context
    from pdd_plan.outputs.placement import allowed_sites, check_sites

    plan = parse_plan(plan_dict())
    ctx = context(plan)
    for a in plan.plans:
        check_sites(plan, ctx.sites, a)
    assert allowed_sites(ctx.sites, "pdd") == {
        "prefill": ["dc-a"],
        "main_decode": ["dc-b"],
        "relay_decode": ["dc-a"],
    }
    assert allowed_sites(ctx.sites, "idc_pd") == {"prefill": ["dc-a"], "decode": ["dc-a"]}


def test_note_input_of_nothing_or_a_missing_path_is_harmless(tmp_path):
    note_input(None)
    note_input(tmp_path / "later.csv")  # a trace named before it is read
    with pytest.raises(InputError, match="is an input"):
        check_output(tmp_path / "later.csv")
