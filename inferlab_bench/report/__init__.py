"""Reading saved results: tables, plots and comparisons (never runs a case)."""
