"""KEDA's cron scaler reads its trigger's metadata (`timezone`, `start`, `end`,
`desiredReplicas`), which the ScaledObject CRD leaves free-form: checked here. `start` and `end`
are standard 5-field cron expressions (minute hour day-of-month month day-of-week; KEDA parses
them with robfig/cron's standard parser), `timezone` an IANA name, `desiredReplicas` a whole
number as text."""

from __future__ import annotations

import re
import zoneinfo

# field: (lowest, highest) value
FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 6),
)
_ITEM = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?$")


def cron_problems(expr: object) -> list[str]:
    """What is wrong with a 5-field cron expression (empty: nothing)."""
    if not isinstance(expr, str):
        return [f"{expr!r} is not a cron expression (a string)"]
    parts = expr.split()
    if len(parts) != 5:
        return [f"'{expr}' has {len(parts)} fields; a cron expression has 5"]
    out = []
    for text, (name, lo, hi) in zip(parts, FIELDS):
        for item in text.split(","):
            m = _ITEM.match(item)
            if m is None:
                out.append(f"'{expr}': {name} '{item}' is not a number, range, * or step")
                continue
            nums = [int(x) for x in re.findall(r"\d+", m.group(1))]
            if any(not lo <= x <= hi for x in nums):
                out.append(f"'{expr}': {name} {item} is outside {lo}-{hi}")
            if len(nums) == 2 and nums[0] > nums[1]:
                out.append(f"'{expr}': {name} range {item} runs backwards")
            if m.group(3) is not None and int(m.group(3)[1:]) == 0:
                out.append(f"'{expr}': {name} step 0")
    return out


def timezone_problems(tz: object) -> list[str]:
    if not isinstance(tz, str) or not tz or tz.startswith(("/", ".")):
        return [f"timezone {tz!r} is not an IANA name"]
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return [f"timezone '{tz}' is not a known IANA name"]
    return []


def trigger_problems(doc: dict) -> list[str]:
    """Every cron trigger of a ScaledObject, its metadata as KEDA's cron scaler reads it."""
    out = []
    triggers = ((doc.get("spec") or {}).get("triggers")) or []
    for i, t in enumerate(triggers):
        if not isinstance(t, dict) or t.get("type") != "cron":
            continue
        md = t.get("metadata") or {}
        where = f"spec/triggers/{i}/metadata"
        for k in ("timezone", "start", "end", "desiredReplicas"):
            if k not in md:
                out.append(f"{where}: cron trigger lacks '{k}'")
        out += [f"{where}/timezone: {p}" for p in timezone_problems(md.get("timezone"))]
        for k in ("start", "end"):
            if k in md:
                out += [f"{where}/{k}: {p}" for p in cron_problems(md[k])]
        n = md.get("desiredReplicas")
        if not (isinstance(n, str) and n.isdigit()):
            out.append(f"{where}/desiredReplicas: {n!r} is not a whole number as text")
        if md.get("start") is not None and md.get("start") == md.get("end"):
            out.append(f"{where}: start and end are the same time")
    return out
