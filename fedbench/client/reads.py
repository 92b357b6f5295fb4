"""Which keys of its train config a ClientApp read: the honest check of an algorithm's client half.

A Flower strategy asks clients for something by putting a key into the
train config (FedProx: `proximal-mu`); a ClientApp that never reads it
trains as if the algorithm were plain FedAvg, and nothing fails. The device
mod hands the app its config as a `ReadKeys` record, which remembers every
key the app looked up (`config["lr"]`, `config.get("lr")`; copying or
iterating over the values counts as reading all), and the reply names the
keys a client half is registered for (fedbench.algorithms) that were never
read. The server warns once per run (fedbench.server.hooks.Signals).
"""

from __future__ import annotations

import copy
from collections.abc import ItemsView, ValuesView

from flwr.app import ConfigRecord, Message, RecordDict

from fedbench.algorithms.base import needed_keys


class ReadKeys(ConfigRecord):
    """A ConfigRecord that remembers which of its keys were read."""

    def __init__(self, record: ConfigRecord) -> None:
        super().__init__(dict(record))
        self.__dict__["read"] = set()

    def __getitem__(self, key: str):  # type: ignore[no-untyped-def]
        self.__dict__["read"].add(key)
        return super().__getitem__(key)

    def values(self) -> ValuesView:  # type: ignore[type-arg]
        self.__dict__["read"].update(self.keys())
        return super().values()

    def items(self) -> ItemsView:  # type: ignore[type-arg]
        self.__dict__["read"].update(self.keys())
        return super().items()

    def copy(self) -> ConfigRecord:  # type: ignore[override]
        self.__dict__["read"].update(self.keys())
        return ConfigRecord(dict(super().items()))

    def unread(self) -> list[str]:
        """The keys a client half needs that were never read."""
        return [k for k in needed_keys(self) if k not in self.__dict__["read"]]


def tracked(msg: Message) -> tuple[Message, list[ReadKeys]]:
    """`msg` with every ConfigRecord watched for reads (the records, to ask afterwards)."""
    content = RecordDict()
    records: list[ReadKeys] = []
    for key, value in msg.content.items():
        if isinstance(value, ConfigRecord):
            value = ReadKeys(value)
            records.append(value)
        content[key] = value
    out = Message(metadata=copy.copy(msg.metadata), content=content)  # type: ignore[call-overload]
    return out, records


def unread(records: list[ReadKeys]) -> list[str]:
    return sorted({k for r in records for k in r.unread()})
