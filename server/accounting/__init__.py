"""Admission and accounting: keys, rate limits, budgets, token counts, costs and the usage ledger."""
