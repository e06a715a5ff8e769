"""Workloads: distributions, traces, prefix-cache simulation, request classes, bathtub."""
