"""Singular routing per request (issue 13): the simulator finishes a relayed request on relay
decode when its own output is at most policy.singular_max_output_tokens, so the planner's
classes are split at that cap (a class is wholly singular or not), not judged at their mean."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.profiles import example_path
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.workload.classes import build_classes
from pdd_plan.workload.distributions import stratified_requests
from pdd_plan.workload.requests import Requests
from pdd_plan.workload.traces.classes import classes_from_requests


def _requests() -> Requests:
    # one hit bin, one input length; outputs 100, 300 (singular at cap 500) and 900, 1500
    out = np.array([100, 300, 900, 1500, 900, 1500], dtype=np.int64)
    n = len(out)
    hit = np.full(n, 0.1)
    return Requests(np.arange(n, dtype=float), np.full(n, 1000), out, hit, hit)


@pytest.mark.unit
def test_a_class_with_outputs_on_both_sides_of_the_cap_is_split():
    r = _requests()
    whole = classes_from_requests(r, 1)
    assert len(whole) == 1 and whole.output_tokens[0] == pytest.approx(5200 / 6)  # > 500
    split = classes_from_requests(r, 1, output_split=500)
    assert len(split) == 2
    # singular first: (100 + 300) / 2 on 2 of 6 requests, then (900+1500+900+1500) / 4 on 4
    np.testing.assert_allclose(split.output_tokens, [200.0, 1200.0])
    np.testing.assert_allclose(split.weight, [2 / 6, 4 / 6])
    assert float(split.weight @ split.output_tokens) == pytest.approx(r.output_tokens.mean())
    # the cap itself is singular (the simulator's rule is output <= cap)
    at_cap = classes_from_requests(r, 1, output_split=300)
    np.testing.assert_allclose(at_cap.weight, [2 / 6, 4 / 6])
    # strata stay inside their class
    assert set(split.node_class.tolist()) == {0, 1}
    for c in (0, 1):
        out = split.nodes.output_tokens[split.node_class == c]
        assert np.all(out <= 500) if c == 0 else np.all(out > 500)


def _ctx(name: str, **policy):
    d = yaml.safe_load(example_path(name).read_text())
    d["policy"].update(policy)
    return build_context(Scenario.model_validate(d), "")


@pytest.mark.unit
def test_no_cap_or_no_relaying_architecture_keeps_the_classes():
    split = _ctx("narrow-line")
    assert split.class_spec.singular_split == 500
    no_cap = _ctx("narrow-line", singular_max_output_tokens=None)
    assert no_cap.class_spec.singular_split is None
    d = yaml.safe_load(example_path("narrow-line").read_text())
    d["architectures"] = ["cdc_pd", "idc_pd"]  # no architecture finishes requests on relay
    no_relay = build_context(Scenario.model_validate(d), "")
    assert no_relay.class_spec.singular_split is None
    a, b = build_classes(no_cap.class_spec), build_classes(no_relay.class_spec)
    np.testing.assert_array_equal(a.weight, b.weight)
    np.testing.assert_array_equal(a.output_tokens, b.output_tokens)
    # as before the split: workload.classes 24 over 8 hit bins = 3 input buckets, fixed input
    w = no_cap.scenario.workload
    req = stratified_requests(w, w.samples, no_cap.scenario.seed, w.rate_rps)  # the planner's draw
    old = classes_from_requests(req, 3)
    np.testing.assert_array_equal(a.weight, old.weight)
    np.testing.assert_allclose(a.hit_p, old.hit_p)
    # with the split every class is singular or not by all its members
    c = build_classes(split.class_spec)
    assert len(c) == 2 * len(a)  # fixed 64K input: one length bucket either way
    fine = c.fine
    for k in range(len(c)):
        out = fine.output_tokens[c.node_class == k]
        assert np.all(out <= 500) or np.all(out > 500)
