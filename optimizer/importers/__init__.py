"""Offering catalogs: loading offering files and importing foreign price catalogs.

The problem loader uses :func:`load_offering_file` (one file) and
:func:`load_catalogs` (a whole ``catalog:`` list, ``default`` included).
"""

__all__ = [
    "catalog_paths",
    "dump_offering_file",
    "gpu_name_map",
    "load_catalogs",
    "load_default_catalog",
    "load_offering_file",
    "offering_row",
    "parse_offerings",
]


def __getattr__(name: str):
    """The names of :mod:`optimizer.importers.offerings`, imported when first asked for (it needs pydantic and
    pandas; the command line reads :mod:`optimizer.importers.derive`'s defaults without them)."""
    if name in __all__:
        from . import offerings

        return getattr(offerings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
