"""Stage 3: the mixed-integer program (container, formulation, reductions)."""
