"""Offering catalogs: loading offering files and importing foreign price catalogs.

The problem loader uses :func:`load_offering_file` (one file) and
:func:`load_catalogs` (a whole ``catalog:`` list, ``default`` included).
"""

from .offerings import (
    catalog_paths,
    dump_offering_file,
    gpu_name_map,
    load_catalogs,
    load_default_catalog,
    load_offering_file,
    offering_row,
    parse_offerings,
)

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
