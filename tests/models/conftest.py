"""Model tests run real forward/backward passes: keep them on one core (shared host)."""

from __future__ import annotations

import torch

torch.set_num_threads(1)
