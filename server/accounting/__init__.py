"""Admission and accounting: keys, rate limits, budgets and the usage ledger."""
