"""Safe YAML reading: no tag runs code, aliases cannot blow up memory or time.

``yaml.safe_load`` already refuses Python tags; on top of it we reject alias
nodes outright, since a problem file never needs them and a few nested ones
("billion laughs") expand exponentially. Files larger than ``MAX_BYTES`` are
refused before parsing. A value its explicit tag cannot hold (``!!float x``)
is a YAML error at its line, not a Python exception.

Two readers give the same data. PyYAML's own, in Python, reads what users
write: its error messages are the ones :func:`parse_yaml` turns into
"line L, column C" messages, and the inputs it refuses are the contract.
The catalog's own files (those under the catalog directory,
:data:`optimizer.catalog.CATALOG_DIR`: 130 KB of offerings that every
``catalog: [default]`` problem reads) are read by libyaml, PyYAML's C
reader, with the same tag resolution: 0.04 s instead of 0.4 s. The two
readers differ only at the edges of what is valid YAML (a tab inside a
plain value, a byte-order mark after a line break, a comment glued to a
block indicator: libyaml accepts what the Python reader refuses), which is
why users' files keep the Python reader; a catalog file libyaml refuses is
read again by the Python reader, for its message. ``tests/test_yamlio.py``
reads every shipped file both ways and compares.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from .errors import InputError

MAX_BYTES = 20 * 1024 * 1024


#: the explicitly tagged scalars whose bad values PyYAML's safe constructors raise a Python exception for
TAGGED_SCALARS = ("float", "int", "bool", "timestamp")


def _tagged(construct):
    """``construct`` (a safe constructor) with a bad value (``!!float x``: PyYAML raises ``ValueError``,
    ``KeyError`` or ``AttributeError``) raised as a ``ConstructorError`` naming the tag, the value and where it
    is, like every other YAML error."""
    def checked(loader, node):
        try:
            return construct(loader, node)
        except (ValueError, KeyError, AttributeError):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a valid {node.tag.rsplit(':', 1)[-1]}", node.start_mark
            ) from None
    return checked


def _tag_constructors(loader) -> None:
    """Register the checked constructors of :data:`TAGGED_SCALARS` on ``loader`` (PyYAML looks constructors up
    in a table of the class)."""
    loader.yaml_constructors = dict(loader.yaml_constructors)
    for tag in TAGGED_SCALARS:
        safe = getattr(yaml.constructor.SafeConstructor, f"construct_yaml_{tag}")
        loader.yaml_constructors[f"tag:yaml.org,2002:{tag}"] = _tagged(safe)


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases (``*name``)."""

    def compose_node(self, parent, index):  # noqa: D401
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases (*name) are not allowed in gpuopt files", event.start_mark
            )
        return super().compose_node(parent, index)


# YAML 1.1 (PyYAML) reads `1.0e11` and `1e9` as strings; YAML 1.2 and every user read them as numbers.
_NoAliasLoader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_NoAliasLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)
                 |[-+]?(?:[0-9][0-9_]*)?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                 |[-+]?\.(?:inf|Inf|INF)
                 |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)
_tag_constructors(_NoAliasLoader)

if getattr(yaml, "__with_libyaml__", False):
    class _CatalogLoader(yaml.CSafeLoader):
        """libyaml's reader with :class:`_NoAliasLoader`'s tag resolution and constructors (aliases: see
        :func:`_read_catalog_text`)."""

    _CatalogLoader.yaml_implicit_resolvers = _NoAliasLoader.yaml_implicit_resolvers
    _tag_constructors(_CatalogLoader)
else:  # a PyYAML built without libyaml: the Python reader reads everything
    _CatalogLoader = None


def parse_yaml(text: str, file: str) -> object:
    """Parse YAML text; errors name the file and the line."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - safe loader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown line"
        problem = exc.problem or exc.context or "invalid YAML"
        ctx = exc.context_mark
        if exc.context and ctx is not None and (mark is None or ctx.line != mark.line):
            # an unclosed bracket is reported at the end of the file; say where it was opened
            problem += f" ({exc.context} started at line {ctx.line + 1}, column {ctx.column + 1})"
        raise InputError(f"YAML syntax error at {line}: {problem}", file=file) from None
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", file=file) from None


def read_text(path: str | Path, *, max_bytes: int = MAX_BYTES, encoding: str = "utf-8") -> str:
    """A user's text file; missing, a directory, too large, not UTF-8 or unreadable is an InputError."""
    path = Path(path)
    file = str(path)
    if not path.exists():
        raise InputError("file not found", file=file)
    if path.is_dir():
        raise InputError("is a directory, not a file", file=file)
    size = path.stat().st_size
    if size > max_bytes:
        raise InputError(f"file is {size} bytes; the limit is {max_bytes}", file=file)
    try:
        return path.read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=file) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", file=file) from None


def _in_catalog(path: Path) -> bool:
    from .catalog import CATALOG_DIR

    return path.resolve().is_relative_to(CATALOG_DIR.resolve())


#: what :func:`_read_catalog_text` gives for a text the Python reader must read
_TO_PYTHON = object()


def _read_catalog_text(text: str) -> object:
    """A catalog file's data by libyaml; :data:`_TO_PYTHON` where the Python reader must read it (an alias, or
    anything libyaml refuses), to refuse it with the message users know. An alias needs a ``*``: text without
    one has none, and is not scanned for them."""
    try:
        if "*" in text and any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=_CatalogLoader)):
            return _TO_PYTHON
        return yaml.load(text, Loader=_CatalogLoader)  # noqa: S506 - safe loader subclass
    except yaml.YAMLError:
        return _TO_PYTHON


def read_yaml(path: str | Path) -> object:
    """Read and parse a YAML file safely; a missing or unreadable file is an InputError.

    A file of the catalog directory is read by libyaml (see the module's docstring); any other by the
    Python reader.
    """
    path = Path(path)
    text = read_text(path)
    if _CatalogLoader is not None and _in_catalog(path):
        data = _read_catalog_text(text)
        if data is not _TO_PYTHON:
            return data
    return parse_yaml(text, str(path))
