"""Pydantic schemas: validation happens here, once, when files are read."""

from .gpu import GPUProfile
from .line import LineSKU
from .model import ModelProfile
from .scenario import ARCHITECTURES, Scenario

__all__ = ["GPUProfile", "LineSKU", "ModelProfile", "Scenario", "ARCHITECTURES"]
