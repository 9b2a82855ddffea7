"""Layouts as permutations and the planner that decides each tensor's layout (the LayoutPlan)."""
