"""fedbench: federated and on-device learning on heterogeneous edge devices."""

import os

# Flower sends usage telemetry unless FLWR_TELEMETRY_ENABLED=0; fedbench never phones
# home, so it sets that default before any Flower module is imported.
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

__version__ = "0.1.0"
