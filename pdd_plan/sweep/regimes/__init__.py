"""Regime maps: where PDD pays over two axes (`pdd-plan regimes`).

`axes` reads each axis into the scenario, `grid` optimizes every cell through the sweep's
executors, `output` writes CSV and the terminal grid, `plot` the heatmap.
"""
