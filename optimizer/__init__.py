"""gpuopt: the cheapest GPU capacity plan (rent, reserve, buy) as a mixed-integer program.

Pipeline, one module per stage:

``load`` (read + validate a problem file and catalogs) -> ``sizing`` (candidate
configurations per workload and GPU type) -> ``formulation`` (a solver-neutral
MIP built per constraint family from whole tables) -> ``backends`` (PuLP/CBC,
OR-Tools) -> ``plan`` (pandas tables) -> ``report`` (table, JSON, CSV).
"""

__version__ = "0.1.0"
