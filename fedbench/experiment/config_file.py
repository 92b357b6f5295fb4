"""config.yaml: the experiment a run folder holds, as `from_config` reads it back (resume=).

Written by `python -m fedbench` and by a ServerApp that `flwr run .` started.
Secrets are masked (fedbench.core.redact). For a user's app (`app=`) the
`data` and `model` groups stay in the file - the typed experiment needs them,
and resume= compares them - but the app loads its own data and model, so a
header says so rather than let the file claim the run trained fedbench's.
"""

from __future__ import annotations

import yaml

from fedbench.core.redact import redact_text
from fedbench.experiment.schema import Experiment

APP_HEADER = (
    "# A run of the Flower app '{name}' (app:): it loaded its own data and model.\n"
    "# data: and model: below are fedbench's defaults, which this run did not train on\n"
    "# (model.name only labels the app's workload in caches).\n"
)


def config_yaml(experiment: Experiment) -> str:
    text = redact_text(yaml.safe_dump(experiment.to_config(), sort_keys=False))
    if experiment.app is not None:
        text = APP_HEADER.format(name=experiment.app.name) + text
    return text
