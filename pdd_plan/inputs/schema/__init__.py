"""Pydantic schemas: validation happens here, once, when files are read."""

from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.scenario import ARCHITECTURES, Scenario

__all__ = ["GPUProfile", "LineSKU", "ModelProfile", "Scenario", "ARCHITECTURES"]
