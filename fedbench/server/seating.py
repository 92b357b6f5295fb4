"""Seatings, re-exported from fedbench.core.seating and fedbench.runtime.seating."""

from fedbench.core.seating import Seating
from fedbench.runtime.seating import FixedSeating, PooledSeating, wait_for_nodes

__all__ = ["FixedSeating", "PooledSeating", "Seating", "wait_for_nodes"]
