"""What the planner writes: the plan file's schema (`plan.Plan`, with its optional `day` and
`uncertainty` blocks) on a strict, frozen base (`base.Out`), and the check that a plan read back
stands where its scenario lets it (`placement`). What it reads is `pdd_plan.inputs`."""
