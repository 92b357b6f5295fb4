"""fedbench: federated and on-device learning on heterogeneous edge devices."""

import os

# Flower phones home unless told not to; fedbench never does (DESIGN.md, brief).
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

__version__ = "0.1.0"
