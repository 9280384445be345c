"""``gpuopt estimate inference|training`` (owned by the sizing work, issue 3)."""

import click


@click.group()
def estimate() -> None:
    """Estimate VRAM, latency and throughput of one configuration."""
