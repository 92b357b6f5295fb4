"""Before round 1: wait for the fleet's nodes and learn which node is which device."""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.serverapp import Grid

from fedbench.app.protocol import CONFIG, IDENTITY, Identity
from fedbench.devices.meters import PHYSICAL
from fedbench.errors import FedbenchError
from fedbench.fleet import DeviceSpec


def register_fleet(
    grid: Grid, devices: tuple[DeviceSpec, ...], experiment: ConfigRecord, timeout_s: float
) -> dict[int, Identity]:
    """Map every device index to its node's identity, waiting up to `timeout_s`.

    The server starts before the nodes register (Flower), so poll until all
    the fleet's nodes are connected, then ask each who it is.
    """
    deadline = time.monotonic() + timeout_s
    while len(nodes := list(grid.get_node_ids())) < len(devices):
        if time.monotonic() > deadline:
            raise FedbenchError(
                f"only {len(nodes)} of the fleet's {len(devices)} devices connected within "
                f"runtime.wait_for_nodes_s={timeout_s:g}s"
            )
        time.sleep(0.2)
    questions = [
        Message(RecordDict({CONFIG: experiment}), dst_node_id=node, message_type=MessageType.QUERY)
        for node in nodes
    ]
    replies = grid.send_and_receive(questions, timeout=max(1.0, deadline - time.monotonic()))
    node_of: dict[int, Identity] = {}
    announced: list[Identity] = []
    for reply in replies:
        if reply.has_error():
            raise FedbenchError(
                f"node {reply.metadata.src_node_id} failed to identify itself: {reply.error.reason}"
            )
        who = Identity.from_config(reply.content.config_records[IDENTITY])
        who = replace(who, node=reply.metadata.src_node_id)
        if 0 <= who.partition_id < len(devices):
            node_of[who.partition_id] = who
        elif who.partition_id < 0:
            announced.append(who)
    seat_physical(devices, node_of, announced)
    missing = [d.name for d in devices if d.index not in node_of]
    if missing:
        raise FedbenchError(f"no node identified itself as device(s): {', '.join(missing[:5])}")
    return node_of


def seat_physical(
    devices: tuple[DeviceSpec, ...], node_of: dict[int, Identity], announced: list[Identity]
) -> None:
    """Give each self-announced (physical) device a free `physical` slot of the fleet.

    A device named like a slot gets that slot; the others take the free
    slots in fleet order, devices sorted by name so the seating does not
    depend on reply order.
    """
    free = [d for d in devices if d.profile == PHYSICAL and d.index not in node_of]
    by_name = {d.name: d for d in free}
    named = [w for w in announced if w.device in by_name]
    others = sorted((w for w in announced if w.device not in by_name), key=lambda w: w.device)
    for who in [*named, *others]:
        slot = by_name.get(who.device) if who in named else (free[0] if free else None)
        if slot is None or slot not in free:
            print(
                f"[fedbench] {who.device} ({who.profile}) joined but the fleet has no free "
                "physical slot for it; it is not used",
                file=sys.stderr,
                flush=True,
            )
            continue
        free.remove(slot)
        node_of[slot.index] = replace(who, partition_id=slot.index)
        print(
            f"[fedbench] physical device {who.device} ({who.profile}) is {slot.name}",
            file=sys.stderr,
            flush=True,
        )
