"""A day of traffic: one fleet for its periods (a base paid every hour plus elastic instances
per period), planned as the operating-points MILP with one point per period weighted by its
hours; its summary, its replay period by period, and its scaling schedule's numbers."""
