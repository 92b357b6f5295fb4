"""The model zoo: one file per model family, one YAML per model in fedbench/conf/model/.

`build_model("densenet40")` returns the module and its input shape; the
registry (registry.py) is the only place that reads model YAMLs.

Conventions every family follows:
- the layers sit in top-level `nn.Sequential` containers (`features`,
  `classifier`, ...): they are the trunk the memory planner checkpoints
  (fedbench.measure.checkpointing);
- a direct child of such a container never modifies its input in place (no
  standalone `ReLU(inplace=True)`), since a checkpointed segment keeps that
  input for its recompute; in-place ops inside a composite unit are fine;
- only plain operators (conv, matmul, norms, activations, pooling, cat),
  so the dispatcher-level workload measurer sees every FLOP.
"""

from __future__ import annotations

from fedbench.models.registry import (
    InputSpec,
    build_from_config,
    build_model,
    input_spec,
    input_spec_from_config,
    model_config,
    model_names,
)

__all__ = [
    "InputSpec",
    "build_from_config",
    "build_model",
    "input_spec",
    "input_spec_from_config",
    "model_config",
    "model_names",
]
