"""pdd-plan: capacity planner and cost/BCR analyzer for PDD LLM serving."""

__version__ = "0.1.0"
