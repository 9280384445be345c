"""``gpuopt catalog ...`` (owned by the catalog work, issue 4)."""

import click


@click.group()
def catalog() -> None:
    """List and show GPUs, models and offerings; import price catalogs."""
