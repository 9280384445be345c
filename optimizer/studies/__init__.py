"""Repeated solves and their analysis: what-if, sweep, rent-vs-buy, diagnosis."""
