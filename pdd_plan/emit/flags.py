"""Check engine command lines against flag tables (data/*-flags.yaml: SGLang from runtime.md,
vLLM and Dynamo's TensorRT-LLM worker from their argument definitions).

``check_argv(argv)`` takes a full command line (``python -m sglang.launch_server ...``,
``python3 -m sglang_router.launch_router ...``; Kubernetes ``command + args`` alike) and returns
a list of problems (empty when it parses). Flags are written ``--flag value`` or
``--flag=value``; booleans take no value; unknown flags, missing or malformed values, repeated
one-shot flags and missing required flags are problems.
"""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from urllib.parse import urlsplit

import yaml

from pdd_plan.emit.plan import data_file

_VAR = re.compile(r"^(\$\([A-Za-z_][A-Za-z0-9_]*\)|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_]\w*)$")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")


TABLE_FILES = {  # engine: its flag tables, newest (the default) first
    "sglang": ("sglang-flags.yaml",),
    "vllm": ("vllm-flags.yaml", "vllm-0.7-flags.yaml"),
    "trtllm": ("trtllm-flags.yaml",),
}
Selection = tuple[tuple[str, str], ...]  # ((engine, version), ...): tables other than the default


@lru_cache(maxsize=1)
def _raw() -> dict[str, dict[str, dict]]:
    """{engine: {version: raw table}} in TABLE_FILES order."""
    out: dict[str, dict[str, dict]] = {}
    for engine, files in TABLE_FILES.items():
        for f in files:
            raw = yaml.safe_load(data_file(f).read_text(encoding="utf-8"))
            out.setdefault(engine, {})[str(raw["version"])] = raw
    return out


def versions() -> dict[str, str]:
    """{engine: the default version (the newest table)}."""
    return {e: next(iter(v)) for e, v in _raw().items()}


def available(engine: str) -> list[str]:
    return list(_raw()[engine])


def engine_source(engine: str, version: str | None = None) -> str:
    return str(_raw()[engine][version or versions()[engine]]["source"]).strip()


@lru_cache(maxsize=8)
def table(selection: Selection = ()) -> dict:
    """{program: {"required": [...], "flags": {canonical: spec}, "alias": {name: canonical},
    "world_size": [flags whose product is the GPUs], "engine", "version"}} for each engine's
    default table, or the version ``selection`` names; "source": SGLang's."""
    chosen = {**versions(), **dict(selection)}
    out: dict = {"source": _raw()["sglang"][chosen["sglang"]]["source"]}
    for engine, by_version in _raw().items():
        raw = by_version[chosen[engine]]
        for prog, spec in raw["programs"].items():
            alias = {}
            for name, f in spec["flags"].items():
                alias[name] = name
                for a in f.get("aliases", []):
                    alias[a] = name
            out[prog] = {
                "required": spec.get("required", []),
                "flags": spec["flags"],
                "alias": alias,
                "world_size": raw.get("world_size", []),
                "engine": engine,
                "version": chosen[engine],
            }
    return out


def program_of(argv: list[str], selection: Selection = ()) -> str | None:
    """`python[3] -m MODULE ...` -> MODULE if the table knows it."""
    if len(argv) >= 3 and argv[0].split("/")[-1].startswith("python") and argv[1] == "-m":
        return argv[2] if argv[2] in table(selection) and argv[2] != "source" else None
    return None


def _is_var(v: str) -> bool:
    return bool(_VAR.match(v))


def _int(v: str, spec: dict) -> str | None:
    if _is_var(v):
        return None
    try:
        x = int(v)
    except ValueError:
        return f"expects an integer, got '{v}'"
    if "min" in spec and x < spec["min"]:
        return f"must be >= {spec['min']}, got {x}"
    if "max" in spec and x > spec["max"]:
        return f"must be <= {spec['max']}, got {x}"
    return None


def _float(v: str, spec: dict) -> str | None:
    try:
        x = float(v)
    except ValueError:
        return f"expects a number, got '{v}'"
    if "min" in spec and x < spec["min"]:
        return f"must be >= {spec['min']}, got {x}"
    if "max" in spec and x > spec["max"]:
        return f"must be <= {spec['max']}, got {x}"
    return None


def _json_object(v: str) -> str | None:
    try:
        ok = isinstance(json.loads(v), dict)
    except ValueError:
        ok = False
    return None if ok else f"expects a JSON object, got '{v[:40]}'"


def _host(h: str) -> bool:
    return _is_var(h) or bool(_HOST.match(h))


def _hostport(v: str) -> str | None:
    h, sep, p = v.rpartition(":")
    if not sep or not h or not _host(h):
        return f"expects HOST:PORT, got '{v}'"
    return _int(p, {"min": 1, "max": 65535})


def _url(v: str) -> str | None:
    u = urlsplit(v)
    if u.scheme not in ("http", "https") or not u.hostname or not _host(u.hostname):
        return f"expects an http(s) URL, got '{v}'"
    try:
        u.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return f"bad port in '{v}'"
    return None


def _value(kind: str, vals: list[str], spec: dict) -> str | None:
    v = vals[0]
    if kind == "int":
        return _int(v, spec)
    if kind == "float":
        return _float(v, spec)
    if kind == "choice":
        ok = spec["choices"]
        return None if v in ok else f"expects one of {', '.join(ok)}, got '{v}'"
    if kind == "hostport":
        return _hostport(v)
    if kind == "url":
        return _url(v)
    if kind == "prefill":
        err = _url(v)
        if err or len(vals) == 1 or vals[1] == "none":
            return err
        return _int(vals[1], {"min": 1, "max": 65535})
    if kind == "json":
        return _json_object(v)
    if kind == "selector":
        bad = [x for x in vals if "=" not in x or x.startswith("=")]
        return f"expects key=value, got '{bad[0]}'" if bad else None
    return None if v else "empty value"


# (fewest, most) values a flag kind takes; every other kind takes exactly one.
_NARGS = {"bool": (0, 0), "prefill": (1, 2), "selector": (1, 64)}


def check_argv(argv: list[str], selection: Selection = ()) -> list[str]:
    """The problems of one SGLang command line (empty when it parses)."""
    prog = program_of(argv, selection)
    if prog is None:
        return [f"not a known engine program: {' '.join(argv[:3])}"]
    t = table(selection)[prog]
    problems: list[str] = []
    seen: dict[str, int] = {}
    i, toks = 0, argv[3:]
    while i < len(toks):
        tok = toks[i]
        i += 1
        if not tok.startswith("--"):
            problems.append(f"{prog}: unexpected argument '{tok}'")
            continue
        name, eq, inline = tok.partition("=")
        canon = t["alias"].get(name)
        if canon is None:
            problems.append(f"{prog}: {_unknown_flag(name, t['alias'])}")
            if eq == "" and i < len(toks) and not toks[i].startswith("--"):
                i += 1  # skip its value, if it looks like one
            continue
        spec = t["flags"][canon]
        seen[canon] = seen.get(canon, 0) + 1
        if seen[canon] > 1 and not spec.get("repeat"):
            problems.append(f"{prog}: {canon} given more than once")
        vals, i = _take_values(toks, i, inline if eq else None, spec["kind"])
        err = _flag_problem(spec, vals, inline=bool(eq))
        if err:
            problems.append(f"{prog}: {canon} {err}")
    problems += [f"{prog}: {p}" for p in _missing_flags(prog, t["required"], seen)]
    return problems


def _unknown_flag(name: str, alias: dict[str, str]) -> str:
    close = difflib.get_close_matches(name, list(alias), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown flag {name}{hint}"


def _take_values(toks: list[str], i: int, inline: str | None, kind: str) -> tuple[list[str], int]:
    """A flag's values: its ``=value``, else the non-flag tokens from ``i`` on (as many as
    its kind takes); and the index of the next token."""
    if inline is not None:
        return [inline], i
    most = _NARGS.get(kind, (1, 1))[1]
    vals: list[str] = []
    while len(vals) < most and i < len(toks) and not toks[i].startswith("--"):
        vals.append(toks[i])
        i += 1
    return vals, i


def _flag_problem(spec: dict, vals: list[str], inline: bool) -> str | None:
    """What is wrong with one flag's values (None: nothing)."""
    kind = spec["kind"]
    fewest, most = _NARGS.get(kind, (1, 1))
    if inline and most == 0:
        return "is a switch and takes no value"
    if len(vals) < fewest:
        return "needs a value"
    if most == 0:
        return None
    return _value(kind, vals, spec)


def _missing_flags(prog: str, required: list[str], seen: dict[str, int]) -> list[str]:
    """Required flags not given; a PD router also needs its workers or service discovery."""
    out = [f"missing required {req}" for req in required if req not in seen]
    if prog == "sglang_router.launch_router" and "--pd-disaggregation" in seen:
        for need in ("--prefill", "--decode"):
            if need not in seen and "--service-discovery" not in seen:
                out.append(f"--pd-disaggregation without {need}")
    return out


def _int_flag(argv: list[str], canon: str, alias: dict[str, str]) -> int | None:
    """The integer value of a one-value flag (last one wins), None if absent or not a literal
    integer (a variable such as ``$(LWS_GROUP_SIZE)``)."""
    val = None
    for i, tok in enumerate(argv):
        name, eq, inline = tok.partition("=")
        if alias.get(name) != canon:
            continue
        val = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    try:
        return int(val) if val is not None else None
    except ValueError:
        return None


def check_gpus(
    argv: list[str], gpus: int, pods: int, per_instance: bool = False, selection: Selection = ()
) -> list[str]:
    """A server's world size (the product of its table's ``world_size`` flags: tp x pp for
    SGLang and TensorRT-LLM, tp x pp x dp for vLLM) must use exactly the instance's GPUs: ``gpus``
    per pod times its nodes (``--nnodes``, else ``pods``), or ``gpus`` for the whole instance
    when ``per_instance`` (runtime.md §1; deploy-targets.md §1)."""
    prog = program_of(argv, selection)
    if prog is None or prog == "sglang_router.launch_router":
        return []
    t = table(selection)[prog]
    alias = t["alias"]
    sizes = [(f, _int_flag(argv, f, alias) or 1) for f in t["world_size"]]
    world = 1
    for _, n in sizes:
        world *= n
    if per_instance:
        total, how = gpus, ""
    else:
        nodes = _int_flag(argv, "--nnodes", alias) or pods
        total, how = gpus * nodes, f"{nodes} node(s) x {gpus} = "
    if world == total:
        return []
    what = " x ".join(f"{f} {n}" for f, n in sizes if n != 1 or f == sizes[0][0])
    return [f"{prog}: {what} does not match the instance's GPUs ({how}{total} GPUs)"]
