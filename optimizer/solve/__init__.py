"""Stage 4: solving the model: back ends, heuristics and the result type."""
