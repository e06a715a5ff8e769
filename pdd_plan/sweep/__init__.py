"""Many optimize runs: grid points, executors, rows, the Pareto front, and the regime map."""
