"""The one place that converts between the experiment and Flower's records.

The experiment crosses the wire as one JSON string: in a ConfigRecord key of
every train message (simulation and deployment alike) and, for `flwr run`,
in the run config. A receiver decodes a given text once per process.
"""

from __future__ import annotations

import functools
import json

from flwr.app import ConfigRecord

from fedbench.errors import FedbenchError
from fedbench.experiment.schema import Experiment

EXPERIMENT_KEY = "fedbench-config"


def to_json(experiment: Experiment) -> str:
    # In the config's own order: some mappings are ordered lists by name (`hooks`: the
    # records are written before the checkpoint that vouches for them is saved).
    return json.dumps(experiment.to_config())


def from_json(text: str, where: str = EXPERIMENT_KEY) -> Experiment:
    return _decode(text, where)


@functools.lru_cache(maxsize=8)
def _decode(text: str, where: str) -> Experiment:
    # Every message of a run carries the same text: a worker decodes it once.
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FedbenchError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(values, dict):
        raise FedbenchError(f"{where}: expected a JSON object")
    return Experiment.from_config(values)


def to_record(experiment: Experiment) -> ConfigRecord:
    return ConfigRecord({EXPERIMENT_KEY: to_json(experiment)})


def from_record(record: ConfigRecord) -> Experiment:
    value = record.get(EXPERIMENT_KEY)
    if not isinstance(value, str):
        raise FedbenchError(f"malformed server message: no '{EXPERIMENT_KEY}' string")
    return from_json(value)
