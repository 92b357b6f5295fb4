"""Data and model of the app: seeded digits and a warm-started LogisticRegression (no torch).

The first 600 digits are split among the nodes by `partition-id` (every
`num-partitions`-th image, 80/20 train/test); the last 297 are the server's.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

CLIENT_SAMPLES = 600
SERVER_TEST_START = 1500
CLASSES = np.arange(10)
Arrays = list[np.ndarray]


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    digits = load_digits()
    return digits.data / 16.0, digits.target


def partition(partition_id: int, num_partitions: int) -> tuple[np.ndarray, ...]:
    """This node's (x_train, y_train, x_test, y_test)."""
    x, y = _digits()
    index = np.arange(partition_id, CLIENT_SAMPLES, num_partitions)
    cut = int(0.8 * len(index))
    return x[index[:cut]], y[index[:cut]], x[index[cut:]], y[index[cut:]]


def server_testset() -> tuple[np.ndarray, np.ndarray]:
    x, y = _digits()
    return x[SERVER_TEST_START:], y[SERVER_TEST_START:]


def initial_arrays() -> Arrays:
    """Zero coefficients and intercepts: the global model before round 1."""
    return [np.zeros((len(CLASSES), 64)), np.zeros(len(CLASSES))]


def model(arrays: Arrays, iterations: int = 1) -> LogisticRegression:
    """A LogisticRegression holding `arrays`, warm-started from them when fitted."""
    lr = LogisticRegression(max_iter=iterations, warm_start=True)
    lr.classes_ = CLASSES
    lr.coef_, lr.intercept_ = arrays[0].copy(), arrays[1].copy()
    return lr


def fit(arrays: Arrays, x: np.ndarray, y: np.ndarray, iterations: int) -> Arrays:
    """`iterations` L-BFGS steps from `arrays` (deterministic; no convergence warning)."""
    lr = model(arrays, iterations)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        lr.fit(x, y)
    return [lr.coef_, lr.intercept_]


def score(arrays: Arrays, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(log loss, accuracy) of the model `arrays` on (x, y)."""
    lr = model(arrays)
    loss = float(log_loss(y, lr.predict_proba(x), labels=CLASSES))
    return loss, float(lr.score(x, y))
