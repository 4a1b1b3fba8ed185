"""Job-fit engine: memory, topology, time and cost of a training job on a GPU offer."""

from app.fit.estimate import MemoryEstimate, estimate_memory
from app.fit.memory import MemoryBreakdown
from app.fit.presets import ModelArch
from app.fit.workload import Workload, resolve_model

__all__ = [
    "MemoryBreakdown",
    "MemoryEstimate",
    "ModelArch",
    "Workload",
    "estimate_memory",
    "resolve_model",
]
