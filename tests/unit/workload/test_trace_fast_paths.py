"""The compiled fast paths of trace reading give what the general paths give.

The byte scanner (``trace_scan``) against ``json.loads``, the reused read buffer
(``ByteWindow``) against iterating the file, and the hash set of seen blocks
(``trace_seen.BlockSet``) against a Python set, including the cases each could get wrong:
lines split across read blocks, trailing blanks and CRLF, a last line without newline, ids
beyond the scanner's 18 digits, ids that collide in the table, repeats inside one request.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from pdd_plan.common.errors import InputError
from pdd_plan.workload.cache import simulate_hits
from pdd_plan.workload.traces import read_trace
from pdd_plan.workload.traces.rows import ByteWindow
from pdd_plan.workload.traces.scan import scan_lines
from pdd_plan.workload.traces.seen import BlockSet


def _rec(t: int, i: int, o: int, ids: list[int]) -> dict:
    return {"timestamp": t, "input_length": i, "output_length": o, "hash_ids": ids}


def _records(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    t, recs = 0, []
    for _ in range(n):
        t += int(rng.integers(0, 30))
        ids = [int(x) for x in rng.integers(0, 60, int(rng.integers(0, 7)))]
        recs.append(_rec(t, int(rng.integers(1, 3000)), int(rng.integers(0, 200)), ids))
    return recs


# ---------------------------------------------------------------- the byte scanner


@pytest.mark.unit
def test_scanner_reads_what_json_reads():
    recs = _records(200, seed=3) + [_rec(10**17, 123456789012345678, 0, [10**18 - 1, 0])]
    buf = "".join(json.dumps(r) + "\n" for r in recs).encode()
    t, i, o, flat, counts, end = scan_lines(buf, 0, 1000, True)
    assert end == len(buf)
    assert t.tolist() == [r["timestamp"] for r in recs]
    assert i.tolist() == [r["input_length"] for r in recs]
    assert o.tolist() == [r["output_length"] for r in recs]
    assert counts.tolist() == [len(r["hash_ids"]) for r in recs]
    assert flat.tolist() == [x for r in recs for x in r["hash_ids"]]


@pytest.mark.unit
def test_scanner_stops_after_max_lines_and_grows_its_id_array():
    many = _rec(1, 5, 0, list(range(1000)))  # more ids than the first allocation holds
    line = (json.dumps(many) + "\n").encode()
    t, _, _, flat, counts, end = scan_lines(line * 3, len(line), 1, False)
    assert end == 2 * len(line) and counts.tolist() == [1000] and flat.tolist() == list(range(1000))


@pytest.mark.unit
@pytest.mark.parametrize(
    "tail,eof,ok",
    [(b" \t\r\n", False, True), (b"\r\n", False, True), (b"", True, True), (b"", False, False),
     (b" x\n", True, False), (b"\n\n", True, True)],
)  # fmt: skip
def test_scanner_line_ends(tail, eof, ok):
    buf = b'{"timestamp": 1, "input_length": 2, "output_length": 3, "hash_ids": [4]}' + tail
    got = scan_lines(buf, 0, 1, eof)
    assert (got is not None) == ok
    if ok:
        assert got[3].tolist() == [4]


@pytest.mark.unit
@pytest.mark.parametrize(
    "line",
    [
        '{"timestamp":1, "input_length": 2, "output_length": 3, "hash_ids": [4]}',  # spacing
        '{"timestamp": 1, "input_length": 0, "output_length": 3, "hash_ids": [4]}',  # 0 input
        '{"timestamp": 1.5, "input_length": 2, "output_length": 3, "hash_ids": [4]}',
        '{"timestamp": 1, "input_length": 2, "output_length": -3, "hash_ids": [4]}',
        '{"timestamp": 1, "input_length": 2, "output_length": 3, "hash_ids": [4,5]}',
        '{"timestamp": 1, "input_length": 2, "output_length": 3, "hash_ids": [4, ]}',
        '{"timestamp": 1, "input_length": 2, "output_length": 3, "hash_ids": [1234567890123456789]}',
        '{"timestamp": 1, "input_length": 2, "output_length": 3}',
        '{"input_length": 2, "timestamp": 1, "output_length": 3, "hash_ids": [4]}',
        "",
    ],
)
def test_scanner_leaves_other_layouts_to_the_general_parser(line):
    assert scan_lines((line + "\n").encode(), 0, 1, True) is None


@pytest.mark.unit
def test_non_canonical_groups_read_like_the_simulator(tmp_path):
    """Canonical and other layouts mixed chunk by chunk (and a 19-digit id, which only the
    exact simulator takes) give the simulator's hits, and errors still name the line."""
    recs = _records(600, seed=5)
    recs[400]["hash_ids"] = [10**19] + recs[400]["hash_ids"]  # beyond int64
    lines = [json.dumps(r) for r in recs]
    for k in range(100, 200):  # one chunk in another spacing
        lines[k] = json.dumps(recs[k], separators=(",", ":"))
    lines[250] += "  \r"  # trailing blanks and CR: still canonical
    f = tmp_path / "mixed.jsonl"
    f.write_text("\n".join(lines), encoding="utf-8")  # no newline after the last line
    want_p, _ = simulate_hits([r["hash_ids"] for r in recs], [r["input_length"] for r in recs])
    for rows in (7, 64, 65_536):
        reqs, info = read_trace(f, chunk_rows=rows)
        np.testing.assert_array_equal(reqs.hit_p, want_p)
        assert info.rows == 600
    lines[470] = lines[470].replace('"output_length": ', '"output_length": -')
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="output_length") as e:
        read_trace(f, chunk_rows=64)
    assert f"{f}:471" in str(e.value)


# ---------------------------------------------------------------- the read buffer


@pytest.mark.unit
@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("rows", [1, 3, 50])
def test_byte_window_hands_out_the_files_lines(block, rows):
    data = b"".join(b"x" * (k % 13) + b"\n" for k in range(200)) + b"last"
    want = list(io.BytesIO(data))
    w = ByteWindow(io.BytesIO(data), rows, block_bytes=block)
    got: list[bytes] = []
    parsed = 0
    while w.fill():
        if parsed % 2:  # alternate: a parser consuming lines itself, then take_lines
            buf, pos, n, eof = w.view()
            raw = bytes(buf)
            del buf  # release the buffer before the next fill
            end, k = pos, 0
            while k < n and end < len(raw):
                nl = raw.find(b"\n", end)
                assert nl >= 0 or eof  # fill() promised whole lines or the file's end
                start, end = end, (len(raw) if nl < 0 else nl + 1)
                got.append(raw[start:end])
                k += 1
            w.consumed(end, k)
        else:
            got.extend(w.take_lines())
        parsed += 1
    assert got == want


# ---------------------------------------------------------------- the set of seen blocks


def _leads_reference(flat: list[int], counts: list[int]) -> list[int]:
    seen: set[int] = set()
    out, p = [], 0
    for c in counts:
        ids = flat[p : p + c]
        k = 0
        while k < c and ids[k] in seen:
            k += 1
        out.append(k)
        seen.update(ids)
        p += c
    return out


@pytest.mark.unit
@pytest.mark.parametrize(
    "ids",
    [
        lambda rng: rng.integers(0, 300, 4000),  # dense, many repeats
        lambda rng: rng.integers(-(2**63), 2**63 - 1, 4000, dtype=np.int64),  # full range
        lambda rng: rng.integers(0, 500, 4000) << 16,  # one slot apart by the table width
        lambda rng: rng.integers(0, 500, 4000) << 40,
        lambda rng: np.arange(200_000),  # grows the table several times
    ],
)
def test_block_set_equals_a_python_set(ids):
    rng = np.random.default_rng(11)
    flat = np.asarray(ids(rng), dtype=np.int64)
    counts = rng.integers(0, 9, flat.shape[0])
    counts = counts[np.cumsum(counts) <= flat.shape[0]]
    flat = flat[: int(counts.sum())]
    half = counts.shape[0] // 2  # two calls: the set carries over
    cut = int(counts[:half].sum())
    s = BlockSet()
    got = np.concatenate([s.leads(flat[:cut], counts[:half]), s.leads(flat[cut:], counts[half:])])
    assert got.tolist() == _leads_reference(flat.tolist(), counts.tolist())
    assert len(s) == len(set(flat.tolist()))
    assert s.sorted_ids().tolist() == sorted(set(flat.tolist()))
