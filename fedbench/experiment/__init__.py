"""The typed experiment: schema, validation, building, and its Flower form (one place)."""

from fedbench.experiment.app import AppConfig
from fedbench.experiment.schema import (
    DataConfig,
    DeviceGroup,
    Experiment,
    FleetConfig,
    ModelConfig,
    ReportConfig,
    TrainConfig,
)
from fedbench.experiment.target import Target

__all__ = [
    "AppConfig",
    "DataConfig",
    "DeviceGroup",
    "Experiment",
    "FleetConfig",
    "ModelConfig",
    "ReportConfig",
    "Target",
    "TrainConfig",
]
