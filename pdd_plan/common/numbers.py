"""One bound for every number read from a JSON (or CSV) input: at most NUMBER_DIGITS digits
in its whole part (limit in common/limits.py).

JSON holds integers of any length and floats past 1e308 (which Python reads as inf); every
reader then does float arithmetic on them, and a 401-digit integer raised OverflowError as an
internal error. `loads` parses a document with hooks that mark such numbers, and walks it once
to name the first one by its path (``end.streams[0].sender.bytes``), so the reader's one-line
error names the file and the field.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

from pdd_plan.common import limits
from pdd_plan.common.errors import InputError


class NumberTooLarge(ValueError):
    """A number over the NUMBER_DIGITS limit; `field` is its path in the document."""

    def __init__(self, field: str | None, literal: str):
        self.field = field
        n_digits = len(literal.lstrip("+-").split(".")[0].split("e")[0].split("E")[0])
        shown = literal if len(literal) <= 24 else f"{literal[:8]}... ({n_digits} digits)"
        self.problem = (
            f"number {shown} is over the limit of {limits.value('NUMBER_DIGITS')} digits in its "
            "whole part"
        )
        self.fix = f"fix the value, or {limits.raise_hint('NUMBER_DIGITS')}"
        super().__init__(self.problem)


class _Big(str):
    """A number literal over the limit, kept as its text until the walk names its path."""


def digits() -> int:
    return min(limits.value("NUMBER_DIGITS"), _INT_DIGITS)


def bound() -> float:
    d = digits()
    return 10.0**d if d < 308 else math.inf  # past 1e308 a float is inf already


# Python's int() reads at most 4,300 digits (a ValueError past them): a raised limit stops here
_INT_DIGITS = 4000


@functools.lru_cache(maxsize=8)
def _decoder(d: int) -> json.JSONDecoder:
    """A JSON decoder whose number hooks mark literals over ``d`` digits, built once per limit:
    reading the limit from the environment inside the hooks cost half of a trace row's parse."""
    b = 10.0**d if d < 308 else math.inf  # past 1e308 a float is inf already

    def _int(s: str) -> int | _Big:
        return _Big(s) if len(s) - s.startswith("-") > d else int(s)

    def _float(s: str) -> float | _Big:
        x = float(s)
        return _Big(s) if not math.isfinite(x) or abs(x) >= b else x

    return json.JSONDecoder(parse_int=_int, parse_float=_float)


def too_large(x: float) -> bool:
    """Whether a number already read (a CSV cell, a float from elsewhere) is over the limit;
    NaN and inf are the callers' own checks."""
    return math.isfinite(x) and abs(x) >= bound()


def check_whole(x: int, field: str | None) -> int:
    """An integer read from text (a CSV cell) under the limit, or NumberTooLarge."""
    if abs(x) >= 10 ** digits():
        raise NumberTooLarge(field, str(x))
    return x


def _walk(doc: Any, path: str) -> None:
    if isinstance(doc, _Big):
        raise NumberTooLarge(path or None, str(doc))
    if isinstance(doc, dict):
        for k, v in doc.items():
            if isinstance(v, dict | list | _Big):
                _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            if isinstance(v, dict | list | _Big):
                _walk(v, f"{path}[{i}]")


def loads(text: str | bytes) -> Any:
    """json.loads with every number bounded: NumberTooLarge (a ValueError) naming the first
    one over the limit; other malformed JSON raises json's ValueError as before. NaN and
    Infinity literals pass (the engines' own json.dump writes them; each reader refuses them
    in the fields it reads)."""
    if isinstance(text, bytes | bytearray):  # as json.loads reads bytes
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    doc = _decoder(digits()).decode(text)
    _walk(doc, "")
    return doc


def load_document(text: str | bytes, file: str, fix: str) -> Any:
    """`loads` for a whole file: a number over the limit is a one-line InputError naming the
    file and its field; bad JSON is the caller's (json's ValueError passes)."""
    try:
        return loads(text)
    except NumberTooLarge as e:
        raise InputError(file, e.field, e.problem, e.fix) from None
