"""The metrics a user's Flower strategy computes on the server, as its `start()` logs them.

`Strategy.start` keeps its results in the `Result` it returns to the app's
`main`, which fedbench never sees; it also logs each as it comes, through
Flower's logger, with the MetricRecord as the log call's argument:

- `Initial global evaluation results: %s` - `evaluate_fn` before round 1;
- `\\t└──> Aggregated MetricRecord: %s` - after each round's training, then
  after its federated evaluation;
- `\\t└──> MetricRecord: %s` - `evaluate_fn` after each round.

Flower's legacy `DefaultWorkflow` logs its strategy's central evaluation the
same way, as `(loss, metrics)`: `initial parameters (loss, other metrics): %s,
%s` and `fit progress: (%s, %s, %s, %s)` (round, loss, metrics, seconds).

`FlowerMetrics` is a logging handler on Flower's logger that hands those
MetricRecords (the objects, not their text) to the app loop, from the
thread the app's ServerApp runs in only. The templates are pinned by
tests/server/test_flower_couplings.py. A strategy that overrides `start()`
and logs otherwise is still run; the loop then records the clients'
evaluation replies itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from flwr.common.logger import FLOWER_LOGGER

INITIAL = "Initial global evaluation results: %s"
AGGREGATED = "\t└──> Aggregated MetricRecord: %s"
CENTRAL = "\t└──> MetricRecord: %s"
LEGACY_INITIAL = "initial parameters (loss, other metrics): %s, %s"
LEGACY_CENTRAL = "fit progress: (%s, %s, %s, %s)"
# template -> (what it is, where its loss and metrics are among the call's arguments)
TEMPLATES: dict[str, tuple[str, int | None, int]] = {
    INITIAL: ("initial", None, 0),
    AGGREGATED: ("aggregated", None, 0),
    CENTRAL: ("central", None, 0),
    LEGACY_INITIAL: ("initial", 0, 1),
    LEGACY_CENTRAL: ("central", 1, 2),
}
Sink = Callable[[str, Mapping[str, float]], None]


class FlowerMetrics(logging.Handler):
    def __init__(self, sink: Sink, thread: int) -> None:
        super().__init__(level=logging.INFO)
        self.sink = sink
        self.thread = thread

    def emit(self, record: logging.LogRecord) -> None:
        found = TEMPLATES.get(record.msg) if isinstance(record.msg, str) else None
        args = record.args
        if isinstance(args, Mapping):  # logging unwraps a lone mapping argument (a MetricRecord)
            args = (args,)
        if found is None or record.thread != self.thread or not isinstance(args, tuple):
            return
        kind, loss_at, metrics_at = found
        metrics = args[metrics_at] if len(args) > metrics_at else None
        if not isinstance(metrics, Mapping):  # MetricRecord, or a legacy metrics dict
            return
        values = {str(k): float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        loss = args[loss_at] if loss_at is not None else None
        if isinstance(loss, (int, float)) and not isinstance(loss, bool):
            values["loss"] = float(loss)
        self.sink(kind, values)


@contextmanager
def flower_metrics(sink: Sink) -> Iterator[None]:
    """While open, the strategy's logged MetricRecords of this thread go to `sink(kind, record)`."""
    handler = FlowerMetrics(sink, threading.get_ident())
    FLOWER_LOGGER.addHandler(handler)
    try:
        yield
    finally:
        FLOWER_LOGGER.removeHandler(handler)
