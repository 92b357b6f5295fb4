"""fedbench/conf/hooks: the run's hooks by name, each a `_target_` built with the group's keys.

The lightning-hydra-template way to compose callbacks: fedbench/conf/hooks/default.yaml
names the built-in hooks (records, progress, loggers, checkpoint), and every
other file of the group adds entries to it:

    python -m fedbench hooks=[default,target_accuracy] hooks.target_accuracy.accuracy=0.9

An entry set to null is dropped (`hooks.progress=null`). An experiment
without the group (an older run folder's config.yaml) gets the default.
Whether the list can run a run (it must keep the records) is the server's
check, fedbench.server.hooks.build_hooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fedbench.errors import FedbenchError
from fedbench.experiment.target import Target
from fedbench.paths import conf_dir


# eq=False: its entries are a dict; compared and hashed by identity, as a Target.
@dataclass(frozen=True, eq=False)
class HooksConfig:
    entries: Mapping[str, Target] = field(default_factory=dict)

    @classmethod
    def from_config(cls, values: object, where: str) -> HooksConfig:
        if isinstance(values, HooksConfig):
            return values
        if not isinstance(values, Mapping):
            raise FedbenchError(
                f"{where} must be a mapping of name -> {{_target_: ..., ...}}, got {values!r}"
            )
        entries = {
            str(name): Target.from_config(value, f"{where}.{name}")
            for name, value in values.items()
            if value is not None
        }
        return cls(entries)

    @classmethod
    def default(cls) -> HooksConfig:
        """fedbench/conf/hooks/default.yaml: the built-in hooks."""
        values = yaml.safe_load((conf_dir() / "hooks" / "default.yaml").read_text())
        return cls.from_config(values, "hooks")

    def to_config(self) -> dict[str, Any]:
        return {name: target.to_config() for name, target in self.entries.items()}
