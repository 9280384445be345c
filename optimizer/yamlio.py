"""Safe YAML reading: no tag runs code, aliases cannot blow up memory or time.

``yaml.safe_load`` already refuses Python tags; on top of it we reject alias
nodes outright, since a problem file never needs them and a few nested ones
("billion laughs") expand exponentially. Files larger than ``MAX_BYTES`` are
refused before parsing.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from .errors import InputError

MAX_BYTES = 20 * 1024 * 1024


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


def read_yaml(path: str | Path) -> object:
    """Read and parse a YAML file safely; a missing or unreadable file is an InputError."""
    return parse_yaml(read_text(path), str(path))
