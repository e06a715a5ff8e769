"""Continuous-batching decode in the replay: the event loop (compiled with numba) and its state."""
