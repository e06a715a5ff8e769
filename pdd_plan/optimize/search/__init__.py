"""The search for one architecture's plan: the fixed- and free-rate drivers over the enumerated
combinations, the objectives (cost, goodput, Dinkelbach), and the result a winning combination
describes (`combo_result`). The caps and owned-first prices they share are base types
(`optimize/caps.py`, `optimize/owned.py`). (`plan.plan_architecture` is the entry point.)"""
