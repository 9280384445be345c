"""Errors a user can act on.

Every input problem becomes an :class:`InputError` that names the file, the
field (a dotted path such as ``offerings[cloud-h100-od].price_per_hour``), the
value, what is allowed and, for misspelt names, the nearest valid one. The CLI
prints it and exits with code 2; no traceback ever reaches a user.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def suggest(name: str, choices: Iterable[str]) -> str | None:
    """Return the valid name closest to ``name`` (case-insensitive), if any is close."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[hits[0]] if hits else None


class GpuoptError(Exception):
    """Base class for every error gpuopt raises on purpose."""

    exit_code = 1


class InputError(GpuoptError):
    """Bad input: a file, a field, a value and what would have been allowed.

    Parameters
    ----------
    message
        What is wrong, in words.
    file, field, value
        Where: the file path, the dotted field path and the offending value.
    allowed
        What would be accepted (a list of names, a range, a type).
    suggestion
        The near match for a misspelt name.
    """

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        field: str | None = None,
        value: object = None,
        allowed: str | None = None,
        suggestion: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.field = field
        self.value = value
        self.allowed = allowed
        self.suggestion = suggestion
        super().__init__(self.render())

    def render(self) -> str:
        where = ": ".join(p for p in (self.file, self.field) if p)
        text = f"{where}: {self.message}" if where else self.message
        if self.value is not None and "value" not in self.message:
            text += f" (value: {self.value!r})"
        if self.allowed:
            text += f"; allowed: {self.allowed}"
        if self.suggestion:
            text += f"; did you mean {self.suggestion!r}?"
        return text

    def with_file(self, file: str) -> "InputError":
        """Return this error with ``file`` filled in if it was unknown."""
        if self.file is None:
            self.file = file
            self.args = (self.render(),)
        return self


class InputErrors(InputError):
    """Several input errors found at once (``validate`` reports them all)."""

    def __init__(self, errors: list[InputError]) -> None:
        self.errors = errors
        super().__init__("\n".join(e.render() for e in errors))

    def render(self) -> str:  # noqa: D401 - list of rendered errors
        return "\n".join(e.render() for e in self.errors)


def unknown_name(kind: str, name: str, choices: Iterable[str], **where) -> InputError:
    """Build the error for a name that is not in ``choices``."""
    choices = sorted(set(choices))
    shown = ", ".join(choices[:30]) + (" ..." if len(choices) > 30 else "")
    return InputError(
        f"unknown {kind} {name!r}",
        allowed=shown,
        suggestion=suggest(name, choices),
        **where,
    )
