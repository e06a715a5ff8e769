"""The leased line: KV bytes, TCP, transfer times, the delay's law under bursts and the pool's smoothing."""
