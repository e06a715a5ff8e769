"""Trace-driven simulator: replay a workload on a plan and measure it.

``sim.run.run(ctx, plan, architecture, n_requests, seed)`` -> :class:`sim.result.SimResult`
(the top stage: it reads the context into an ``inputs.pieces.ReplaySetup``);
``sim.run.replay_plan(setup, ...)`` the same on those pieces; ``sim.run.verify(setup, plan,
architecture, n_requests, seed)`` -> dict with the SLA checks the optimizer uses to tighten and
re-solve; ``sim.worker`` runs those replays in a child process beside the planner. The package
itself imports nothing, so that its light modules (``sim.worker``) load alone.
"""
