"""YAML 1.1 booleans: Kubernetes and Dynamo read YAML 1.1, where a plain ``y``, ``n``, ``on`` or
``off`` is a boolean; the DGD admission webhook rejects such a value where a string is due (an
env value), so AIConfigurator quotes them (deploy-targets.md §1, AIC dgd_model.py). PyYAML's
SafeDumper quotes ``yes``/``no``/``on``/``off`` but writes ``y`` and ``n`` plain. ``Dumper``
knows the whole YAML 1.1 set and so quotes every one; ``unquoted`` finds env values that a
YAML 1.1 reader would not take as strings."""

from __future__ import annotations

import re

import yaml

BOOL11 = re.compile(
    r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$"
)


class Dumper(yaml.SafeDumper):
    pass


class Loader(yaml.SafeLoader):
    bool_values = {**yaml.SafeLoader.bool_values, "y": True, "n": False}


for _cls in (Dumper, Loader):
    _cls.add_implicit_resolver("tag:yaml.org,2002:bool", BOOL11, list("yYnNtTfFoO"))


def dump_all(docs: list[dict]) -> str:
    return yaml.dump_all(docs, Dumper=Dumper, sort_keys=False, width=1000, explicit_start=True)


def _env_lists(node: object):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("env", "envs") and isinstance(v, list):
                yield v
            else:
                yield from _env_lists(v)
    elif isinstance(node, list):
        for v in node:
            yield from _env_lists(v)


def unquoted(text: str) -> list[str]:
    """Env entries whose ``value`` a YAML 1.1 reader takes as other than a string."""
    out = []
    for doc in yaml.load_all(text, Loader=Loader):  # noqa: S506 (a SafeLoader subclass)
        for env in _env_lists(doc):
            for e in env:
                if isinstance(e, dict) and "value" in e and not isinstance(e["value"], str):
                    v = e["value"]
                    out.append(f"env {e.get('name')}: value {v!r} is not a string in YAML 1.1")
    return out
