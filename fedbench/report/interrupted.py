"""A run's summary marked `interrupted` by the driver, when its server could not say so.

The server writes the run's ending itself (fedbench.report.writer, `finish`). A
driver stopping the run on a second Ctrl-C or SIGTERM waits for it a moment
only (fedbench.core.interrupt; runtime=deployment's stop); a summary.json that
still says `running` after that is marked here.
"""

from __future__ import annotations

import json
from pathlib import Path

from fedbench.errors import FedbenchError
from fedbench.folders import write_file
from fedbench.report.provenance import now
from fedbench.report.writer import SUMMARY_JSON
from fedbench.trust import bounded

LATE_ENDING = "interrupted: the server was stopped before it wrote the run's ending"


def mark_interrupted(run_dir: Path, why: str = LATE_ENDING) -> bool:
    """Mark a summary.json still saying `running` interrupted; True if it did.

    Only the status, failure, error and end time change; what the rounds measured stays
    as the server last wrote it (the checkpoint agrees with it, so `resume=` continues).
    """
    path = run_dir / SUMMARY_JSON
    if path.is_symlink():
        return False  # fedbench writes into a run folder, never through a link
    try:
        summary = bounded.load_json(path, str(path), bounded.SUMMARY_JSON)
    except (OSError, ValueError, FedbenchError):
        return False
    if not isinstance(summary, dict) or summary.get("status") != "running":
        return False
    summary.update(status="interrupted", failure="interrupted", error=why)
    if isinstance(summary.get("provenance"), dict):
        summary["provenance"]["end_time"] = now()
    write_file(path, json.dumps(summary, indent=2) + "\n")
    return True
