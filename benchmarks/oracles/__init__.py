"""Reference solvers tests and benchmarks check the planner against (brute force over combinations)."""
