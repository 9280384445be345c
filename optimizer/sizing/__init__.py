"""Stage 2a: sizing -- VRAM, latency and throughput from an architecture and a GPU type.

Analytic first-principles models (rooflines with named, calibrated
efficiency factors; see ``docs/sizing.md``):

- :mod:`.architecture` -- exact parameter and KV-cache counts;
- :mod:`.hardware` -- GPU datasheet figures and supported precisions;
- :mod:`.efficiency` -- the named efficiency factors and their overrides;
- :mod:`.inference` -- VRAM fit, TTFT, TPOT, rps of one replica;
- :mod:`.training` -- memory, parallel layout and hours of a training run;
- :mod:`.candidates` -- candidate tables for the MIP.
"""

from .architecture import ModelArch, kv_bytes_per_token, load_models, resolve_model
from .candidates import (
    SIZED_INFERENCE_COLUMNS,
    TP_DEGREES,
    SIZED_TRAINING_COLUMNS,
    inference_candidates,
    load_reference,
    training_candidates,
)
from .efficiency import Efficiency, load_efficiency
from .hardware import GpuSpec, load_gpus, resolve_gpu
from .inference import estimate_inference
from .training import estimate_training

__all__ = [
    "Efficiency",
    "GpuSpec",
    "SIZED_INFERENCE_COLUMNS",
    "ModelArch",
    "TP_DEGREES",
    "SIZED_TRAINING_COLUMNS",
    "estimate_inference",
    "estimate_training",
    "inference_candidates",
    "kv_bytes_per_token",
    "load_efficiency",
    "load_gpus",
    "load_models",
    "load_reference",
    "resolve_gpu",
    "resolve_model",
    "training_candidates",
]
