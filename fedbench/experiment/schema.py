"""The typed experiment: one frozen dataclass per config group (fedbench/conf/<group>/).

Groups whose YAML names a `_target_` (strategy, algorithm, round_close,
scenario, runtime, data.source, model.net) are a `Target`: the class's own
constructor signature is their schema. The others are spelled out here, with
their ranges. `Experiment.from_config` validates everything before anything
starts; `Experiment.to_config` is its plain form (what config.yaml holds and
what crosses the wire to clients, fedbench.experiment.codec).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from fedbench.devices.faults import FaultModel, fault_models
from fedbench.devices.knobs import Knobs
from fedbench.errors import FedbenchError
from fedbench.experiment.app import AppConfig
from fedbench.experiment.hooks import HooksConfig
from fedbench.experiment.optimizer import OptimizerTarget
from fedbench.experiment.population import PopulationConfig
from fedbench.experiment.target import Target
from fedbench.experiment.typed import check, dump, parse
from fedbench.train.loop import TrainParams

# Bounds that keep a typo from eating the host's memory before anything fails.
MAX_DEVICES = 1_000_000
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class PartitionConfig:
    """fedbench/conf/data/partition: a Flower Datasets partitioner, or fedbench's `sampled`.

    Every key but `scheme` and `size` is a constructor parameter of one of
    flwr-datasets' partitioners (fedbench.data.partitioners), null meaning
    the library's default; which keys a scheme takes is read from its class
    when the partitions are drawn, so a key the chosen scheme does not take
    is refused there. Sequences are held as tuples (hashable: the data
    context is cached by config).
    """

    scheme: str = "iid"
    size: int | None = check(None, ge=1)  # sampled only: examples each device holds
    partition_by: str | None = None  # label, or natural_id (the data's owners)
    alpha: Any = None  # dirichlet, inner_dirichlet: a float or one per class
    min_partition_size: int | None = None  # dirichlet
    self_balancing: bool | None = None  # dirichlet
    num_classes_per_partition: int | None = None  # pathological
    class_assignment_mode: str | None = None  # pathological
    num_shards_per_partition: int | None = None  # shard
    shard_size: int | None = None  # shard
    keep_incomplete_shard: bool | None = None  # shard
    group_size: int | None = None  # grouped_natural_id
    mode: str | None = None  # grouped_natural_id
    sort_unique_ids: bool | None = None  # grouped_natural_id
    partition_sizes: Any = None  # size, inner_dirichlet: examples per device
    strictness: float | None = None  # continuous
    distribution_array: Any = None  # distribution
    num_unique_labels_per_partition: int | None = None  # distribution
    preassigned_num_samples_per_label: int | None = None  # distribution
    rescale: bool | None = None  # distribution
    shuffle: bool | None = None  # most label-based schemes

    def __post_init__(self) -> None:
        for name in ("alpha", "partition_sizes", "distribution_array"):
            value = getattr(self, name)
            if isinstance(value, list | tuple):
                object.__setattr__(self, name, _frozen(value))

    def params(self) -> dict[str, Any]:
        """The partitioner's parameters: every key but scheme and size, nulls left out."""
        plain = {k: v for k, v in dump(self).items() if k not in ("scheme", "size")}
        return {k: v for k, v in plain.items() if v is not None}


def _frozen(value: Any) -> Any:
    """Lists (nested for distribution_array) as tuples."""
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


@dataclass(frozen=True)
class DataConfig:
    """fedbench/conf/data: the data set, its splits and how the device pool is partitioned."""

    name: str
    num_classes: int = check(ge=2, le=1_000_000)
    source: Target = field(default_factory=lambda: Target("", {}))
    test_fraction: float = check(0.2, gt=0.0, lt=1.0)
    server_fraction: float = check(0.3, ge=0.0, lt=1.0)
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    augment: bool = True


@dataclass(frozen=True)
class ModelConfig:
    """conf/model: the network (`net`, built by `_target_`) and one input example's shape."""

    name: str
    input_shape: tuple[int, ...]
    net: Target
    input_dtype: Literal["float32", "int64"] = "float32"
    input_high: int | None = check(None, ge=1)

    def __post_init__(self) -> None:
        if not self.input_shape or any(d < 1 for d in self.input_shape):
            raise FedbenchError(
                f"model.input_shape={list(self.input_shape)}: positive sizes, e.g. [3, 32, 32]"
            )

    @property
    def torch_dtype(self) -> torch.dtype:
        """`input_dtype` as a torch dtype (what the workload measurer feeds the model)."""
        return torch.int64 if self.input_dtype == "int64" else torch.float32

    def to_plain(self) -> dict[str, Any]:
        """The model config as the zoo's registry reads it (fedbench.models)."""
        return {k: v for k, v in dump(self).items() if v is not None}


@dataclass(frozen=True)
class DeviceGroup:
    profile: str  # a name in fedbench/device_profiles/, a profile YAML path, "host" or "physical"
    count: int = check(1, ge=1, le=MAX_DEVICES)


# eq=False: compared and hashed by identity, so a decoded fleet can key a cache.
@dataclass(frozen=True, eq=False)
class FleetConfig:
    """fedbench/conf/fleet: groups of `{profile, count}`, resized by `scale`, with knobs and faults.

    `population` (None: every device is its profile) draws each device its
    own speed, network, availability and battery (fedbench.population).
    """

    name: str
    devices: tuple[DeviceGroup, ...]
    scale: int | None = check(None, ge=1, le=MAX_DEVICES)
    knobs: Mapping[str, Any] = field(default_factory=dict)
    faults: Mapping[str, Any] = field(default_factory=dict)
    population: PopulationConfig | None = None

    def __post_init__(self) -> None:
        if not self.devices:
            raise FedbenchError("fleet.devices must be a non-empty list of {profile, count}")
        total = sum(g.count for g in self.devices) if self.scale is None else self.scale
        if total > MAX_DEVICES:
            raise FedbenchError(
                f"fleet: {total} devices; at most {MAX_DEVICES:,} "
                "(the sum of fleet.devices counts, or fleet.scale)"
            )
        if self.scale is not None and self.scale < len(self.devices):
            raise FedbenchError(
                f"fleet.scale={self.scale}: must be >= the number of groups ({len(self.devices)})"
            )
        Knobs.from_mapping(self.knobs, "fleet.knobs")
        fault_models(self.faults)
        profiles = sorted({g.profile for g in self.devices})
        for name in self.faults or {}:
            if name != "default" and name not in profiles:
                raise FedbenchError(
                    f"fleet.faults.{name}: no device of profile '{name}' in this fleet; "
                    f"valid: default, {', '.join(profiles)}"
                )

    def knob_values(self) -> Knobs:
        return Knobs.from_mapping(self.knobs, "fleet.knobs")

    def fault_models(self) -> dict[str, FaultModel]:
        return fault_models(self.faults)


@dataclass(frozen=True)
class TrainConfig:
    """fedbench/conf/train: local training on every device (fedbench's own ClientApp).

    The hyperparameters (batch_size ... weight_decay) travel in the train
    config of every message (fedbench.train.hyper); `optimizer` is a
    `_partial_` target (fedbench.experiment.optimizer).
    """

    batch_size: int = check(16, ge=1, le=1 << 20)
    local_epochs: int = check(1, ge=1, le=100_000)
    lr: float = check(0.01, gt=0.0, le=1e3)
    momentum: float = check(0.9, ge=0.0, lt=1.0)
    weight_decay: float = check(5e-4, ge=0.0, le=1.0)
    optimizer: OptimizerTarget = field(
        default_factory=lambda: OptimizerTarget.from_config("sgd", "train.optimizer")
    )
    memory_planner: Literal["auto", "off"] = "auto"
    bn_momentum_scaled: bool = False

    def params(self) -> TrainParams:
        """Local training as this group sets it, before a round's train config (no halves)."""
        return TrainParams(
            batch_size=self.batch_size,
            local_epochs=self.local_epochs,
            lr=self.lr,
            momentum=self.momentum,
            weight_decay=self.weight_decay,
            bn_momentum_scaled=self.bn_momentum_scaled,
            optimizer=self.optimizer.local(),
        )


@dataclass(frozen=True)
class ReportConfig:
    """fedbench/conf/report: what a run writes besides rounds.csv and summary.json."""

    plots: bool = True  # figures in the run folder at the end
    progress_per_round: bool = False  # a console line per round (false: per evaluation)
    # Experiment trackers (fedbench.report.loggers): names, or {_target_: ...} mappings.
    loggers: tuple[str | dict[str, Any], ...] = ()


@dataclass(frozen=True)
class DefenseConfig:
    """conf/defense: what a client's reply must satisfy to reach the aggregate (server.defense)."""

    # Refuse an update whose distance from the global model exceeds this many
    # times the round's (lower) median distance; null: no bound (robust
    # `algorithm=` options such as FedMedian or Krum then face attacks alone).
    max_norm_ratio: float | None = check(10.0, gt=1.0, le=1e12)
    # Most examples a device the server cannot count may claim (a user's app,
    # a stock Flower client); fedbench's own app is bounded by the scenario.
    max_examples: int = check(1_000_000, ge=1, le=2**53)
    # Longest believable round trip of one device (seconds, virtual or measured).
    max_round_trip_s: float = check(7 * 86_400.0, gt=0.0, le=1e9)
    # Highest believable average power of a device without a profile (physical, host).
    max_power_w: float = check(1_000.0, gt=0.0, le=1e6)


@dataclass(frozen=True, eq=False)
class Experiment:
    """One run, validated: every group typed, every `_target_` checked against its class."""

    data: DataConfig
    model: ModelConfig
    fleet: FleetConfig
    strategy: Target  # device selection (strategies/)
    algorithm: Target  # a Flower strategy: aggregation (flwr.serverapp.strategy)
    round_close: Target  # when a round stops waiting (fedbench.server.close)
    mode: Target  # synchronous rounds or asynchronous FedBuff (fedbench.server.modes)
    scenario: Target
    train: TrainConfig
    runtime: Target
    report: ReportConfig = field(default_factory=ReportConfig)
    defense: DefenseConfig = field(default_factory=DefenseConfig)
    hooks: HooksConfig = field(default_factory=HooksConfig.default)  # around the run's rounds
    seed: int = check(0, ge=0, le=MAX_SEED)
    name: str = "default"
    output_dir: str = ""
    verbose: bool = False
    app: AppConfig | None = None  # a user's Flower app; None: fedbench's own ClientApp

    @classmethod
    def from_config(cls, values: Mapping[str, Any], where: str = "") -> Experiment:
        return parse(cls, values, where)

    def to_config(self) -> dict[str, Any]:
        """The plain form `from_config` reads back (config.yaml, the wire)."""
        return {f: dump(getattr(self, f)) for f in self.__dataclass_fields__}
