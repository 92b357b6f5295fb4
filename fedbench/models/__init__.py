"""The model zoo: one file per model family, one YAML per model in conf/model/.

`build_model("densenet40")` returns the module and its input shape; the
registry (registry.py) is the only place that reads model YAMLs.
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
