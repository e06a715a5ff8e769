"""The search for one architecture's plan: the fixed- and free-rate drivers over the enumerated
combinations, the objectives (cost, goodput, Dinkelbach), the caps and owned-first prices.
(`plan.plan_architecture` is the entry point.)"""
