"""What every study is: a frozen set of parameters (from its YAML) that runs on a device.

A study's parameters come from fedbench/conf/characterize/<name>.yaml (their
defaults) and the command line (`key=value`); its `run` asks the device for
step costs, writes the CSV and figures into the output folder and returns
a `StudyResult` with summary lines comparing against the paper.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fedbench.characterize.device import Device
from fedbench.characterize.models import check_models
from fedbench.characterize.output import Columns, StudyResult
from fedbench.errors import FedbenchError

# `models=paper` picks the study's `paper_models`.
PAPER = "paper"


@dataclass(frozen=True, kw_only=True)
class Study(ABC):
    # Batches up to this are measured, larger ones extrapolated (workloads.py).
    exact_max_batch: int = 8

    name: ClassVar[str]
    paper: ClassVar[str]  # which paper figure or table the study reproduces
    columns: ClassVar[Columns]
    needs_workloads: ClassVar[bool] = True

    @abstractmethod
    def run(self, device: Device, out: Path) -> StudyResult:
        """Measure on `device`, write into `out`, summarise."""


def pick_models(
    models: tuple[str, ...], paper_models: tuple[str, ...], key: str
) -> tuple[str, ...]:
    picked = paper_models if models == (PAPER,) else models
    if not picked:
        raise FedbenchError(f"{key}: expected at least one model")
    check_models(picked, key)
    return picked


def positive(values: tuple[int, ...], key: str) -> None:
    if not values or any(v < 1 for v in values):
        raise FedbenchError(f"{key}={','.join(map(str, values))}: expected positive integers")
