"""Round-close policies (`round_close=`): one per file, a small base class."""

from fedbench.server.close.base import Closing, RoundClose
from fedbench.server.close.deadline import Deadline
from fedbench.server.close.first_k import FirstK
from fedbench.server.close.wait_all import WaitForAll

__all__ = ["Closing", "Deadline", "FirstK", "RoundClose", "WaitForAll"]
