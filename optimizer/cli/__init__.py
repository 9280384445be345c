"""The ``gpuopt`` command line: one click group, one module per command family.

Every command turns a :class:`~optimizer.errors.InputError` into a message on
stderr and exit code 2; no traceback reaches a user.
"""

from __future__ import annotations

import click

from .. import __version__
from .common import GpuoptGroup


@click.group(cls=GpuoptGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuopt")
def main() -> None:
    """Plan GPU capacity (rent, reserve, buy) at least cost."""


from . import catalog as _catalog  # noqa: E402
from . import estimate as _estimate  # noqa: E402
from . import schema as _schema  # noqa: E402
from . import rentbuy as _rentbuy  # noqa: E402
from . import report as _report  # noqa: E402
from . import solve as _solve  # noqa: E402
from . import validate as _validate  # noqa: E402
from . import sweep as _sweep  # noqa: E402
from . import whatif as _whatif  # noqa: E402

main.add_command(_solve.solve)
main.add_command(_estimate.estimate)
main.add_command(_catalog.catalog)
main.add_command(_whatif.whatif)
main.add_command(_sweep.sweep)
main.add_command(_validate.validate)
main.add_command(_schema.schema)
main.add_command(_rentbuy.rentbuy)
main.add_command(_report.report)
