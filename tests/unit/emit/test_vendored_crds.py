"""The CRDs vendored for the Dynamo, llm-d and KServe targets: the upstream samples quoted in
deploy-targets.md validate strictly, and a misspelled or mistyped field does not."""

from __future__ import annotations

import copy

import pytest
import yaml

from pdd_plan.emit import validation

pytestmark = pytest.mark.unit

# DYN@2a6da14c:examples/backends/vllm/deploy/disagg.yaml, as adapted in deploy-targets.md §1
DGD = yaml.safe_load("""
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata: {name: vllm-disagg}
spec:
  backendFramework: vllm
  experimental: {kvTransferPolicy: {labelKey: topology.kubernetes.io/zone, domain: zone,
    enforcement: required}}
  components:
  - {name: Frontend, type: frontend, replicas: 1, podTemplate: {spec: {containers: [{name: main,
      image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0"}]}}}
  - name: VllmDecodeWorker
    type: decode
    replicas: 2
    podTemplate: {spec: {nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200},
      containers: [{name: main, image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0",
      command: [python3, -m, dynamo.vllm], resources: {limits: {nvidia.com/gpu: "2"}},
      args: [--model, Qwen/Qwen3-0.6B, --disaggregation-mode, decode]}]}}
""")
# KS@aaac4e29:docs/samples/llmisvc/single-node-gpu/llm-inference-service-pd-qwen2-7b-gpu.yaml
LLMISVC = yaml.safe_load("""
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {name: qwen2-7b-instruct-pd}
spec:
  model: {uri: "hf://Qwen/Qwen2.5-7B-Instruct", name: Qwen/Qwen2.5-7B-Instruct}
  replicas: 1
  parallelism: {tensor: 1}
  router: {route: {}, gateway: {}, scheduler: {}}
  template: {containers: [{name: main, resources: {limits: {nvidia.com/gpu: "1"}}}]}
  prefill:
    replicas: 2
    parallelism: {tensor: 1}
    template: {containers: [{name: main, resources: {limits: {nvidia.com/gpu: "1"}}}]}
""")
# GIE@84436a96:site-src/api-types/inferencepool.md, as in deploy-targets.md §4
POOL = yaml.safe_load("""
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: gpt-oss-pd}
spec:
  selector: {matchLabels: {llm-d.ai/guide: pd-disaggregation}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: {name: gpt-oss-pd-epp, port: {number: 9002}, failureMode: FailOpen}
""")


@pytest.mark.parametrize("doc", [DGD, LLMISVC, POOL], ids=["dgd", "llmisvc", "pool"])
def test_upstream_samples_validate_strictly(doc) -> None:
    assert validation.validate(doc) == []


def test_every_vendored_kind_is_known() -> None:
    names = {p.name for p in validation.schema_dir().iterdir()}
    for (api, kind), f in validation.SCHEMA_FILES.items():
        assert f in names
        assert validation.known({"apiVersion": api, "kind": kind})
    kinds = {k for _, k in validation.SCHEMA_FILES}
    assert {"DynamoGraphDeployment", "LLMInferenceService", "InferencePool"} <= kinds


def test_misspelled_field_is_caught_only_in_strict_mode() -> None:
    bad = copy.deepcopy(DGD)
    bad["spec"]["components"][1]["replica"] = 3  # not `replicas`
    assert validation.validate(bad, strict_mode=False) == []
    errs = validation.validate(bad)
    assert len(errs) == 1 and "replica" in errs[0]


def test_wrong_types_and_enums_are_caught() -> None:
    bad = copy.deepcopy(DGD)
    bad["spec"]["components"][1]["type"] = "relay"  # not a Dynamo component type
    bad["spec"]["backendFramework"] = "tgi"
    assert len(validation.validate(bad)) == 2
    pool = copy.deepcopy(POOL)
    pool["spec"]["targetPorts"] = [{"number": 70000}]
    assert len(validation.validate(pool)) == 1
    isvc = copy.deepcopy(LLMISVC)
    del isvc["spec"]["model"]["uri"]  # required
    assert len(validation.validate(isvc)) == 1
