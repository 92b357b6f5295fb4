"""What one device of a population is, re-exported from fedbench.core.device."""

from fedbench.core.device import Traits

__all__ = ["Traits"]
