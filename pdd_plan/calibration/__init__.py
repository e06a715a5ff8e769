"""Fitting the perf model's efficiency factors to published measurements, and the readers that turn engine result files and iperf3 runs into them."""
