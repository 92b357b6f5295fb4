"""Algorithms with a client half: one file each, the strategy and what clients do with its key.

Importing the package registers the built-in client halves (fedbench.algorithms.base).
"""

from fedbench.algorithms import fedprox as fedprox
from fedbench.algorithms import scaffold as scaffold
from fedbench.algorithms import submodels as submodels
