"""Keep Flower's and Ray's log flood in the run folder, not on the console."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import cast

from flwr.common.logger import FLOWER_LOGGER

from fedbench.core.redact import redact_text
from fedbench.folders import open_to_write


class RunFolderLog(logging.FileHandler):
    """A FileHandler that opens its file in the run folder without following a link."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        open_to_write(path, "a").close()  # a link at the name is refused here, not at first log
        super().__init__(path, delay=True)

    def _open(self) -> io.TextIOWrapper:
        path = Path(self.baseFilename)
        return cast(io.TextIOWrapper, open_to_write(path, "a", encoding=self.encoding))


class RedactingFormatter(logging.Formatter):
    """A log line with the run's secrets masked: flower.log travels with the run folder."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


def route_flower_logs(run_dir: Path, verbose: bool) -> logging.Handler | None:
    """Send Flower's logger to `run_dir/flower.log`; with `verbose`, leave it on the console."""
    # Flower's state database logs its migrations at INFO through alembic.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if verbose:
        return None
    handler = RunFolderLog(run_dir / "flower.log")
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(message)s"))
    for h in list(FLOWER_LOGGER.handlers):
        FLOWER_LOGGER.removeHandler(h)
    FLOWER_LOGGER.addHandler(handler)
    FLOWER_LOGGER.propagate = False
    return handler


def copy_flower_logs(run_dir: Path) -> logging.Handler:
    """Also write Flower's logger to `run_dir/flower.log`, keeping its other handlers.

    A ServerApp that `flwr run` started streams its log to the SuperLink
    (`flwr log`, `flwr run --stream`): the run folder gets a copy, not the only one.
    """
    handler = RunFolderLog(run_dir / "flower.log")
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(message)s"))
    FLOWER_LOGGER.addHandler(handler)
    return handler
