"""``gpuopt solve``."""

import click


@click.command()
@click.argument("problem", type=click.Path(dir_okay=False))
def solve(problem: str) -> None:
    """Solve PROBLEM and print the cheapest plan."""
    raise NotImplementedError
