"""The RoundReport and its keys, re-exported from their home in fedbench.core.records."""

from fedbench.core.records import (
    CSV_FIELDS,
    STATUSES,
    UNPROFILED,
    Kind,
    RoundReport,
    Status,
    from_record,
    to_record,
    to_row,
)

__all__ = [
    "CSV_FIELDS",
    "STATUSES",
    "UNPROFILED",
    "Kind",
    "RoundReport",
    "Status",
    "from_record",
    "to_record",
    "to_row",
]
