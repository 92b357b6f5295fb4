"""Crash-safe runs: after every round, everything needed to continue, written atomically.

`checkpoint.pt` in the run folder holds the loop's state (round, virtual
clock, model version, global weights), the selector's state, the wrapped
Flower strategy's state (server optimizer moments of FedAdam, FedAvgM's
momentum, ...), the ledger (which carries the emulated devices' temperature
and battery), RNG states and the run writer's counters with the byte length
of rounds.csv. Only tensors and plain data are stored, and it is read back
with `torch.load(weights_only=True)`: a checkpoint cannot run code. A run
resumed from it continues after the last complete round and, with the same
seed, produces the same records and accuracy as a run never interrupted.

The file is keyed (format 3): a header line, the id of the key that wrote it
and an HMAC-SHA256 of the body under this user's secret (fedbench.trust.key),
then the body (`torch.save`). `load` checks the HMAC before it parses a byte of
the body, so an edited checkpoint - or rounds.csv edited with the checkpoint's
fingerprint recomputed - is refused. One written under another account's key
cannot be verified; the driver may accept it explicitly (`resume_untrusted=true`,
fedbench.resume), and then names the exact bytes it accepted to the server in
`FEDBENCH_ACCEPTED_CHECKPOINT` (their SHA-256), so the server reads the same
file or nothing.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord

from fedbench.errors import FedbenchError
from fedbench.trust import bounded, key

CHECKPOINT = "checkpoint.pt"
FORMAT = 3
MAGIC = b"fedbench-checkpoint 3\n"
MAC_LABEL = "checkpoint"
ACCEPTED_ENV = "FEDBENCH_ACCEPTED_CHECKPOINT"  # SHA-256 of a body the driver accepted unkeyed
UNTRUSTED_HINT = "resume_untrusted=true continues it anyway, its content still checked"


@dataclass(frozen=True)
class Checkpoint:
    round: int  # the last complete round
    now_s: float  # the virtual clock after it
    model_version: int
    arrays: dict[str, torch.Tensor]
    selector: dict[str, Any]
    algorithm: dict[str, Any]
    ledger: dict[str, Any]
    writer: dict[str, Any]
    rng: dict[str, Any]


def rng_state() -> dict[str, Any]:
    kind, keys, pos, has_gauss, cached = np.random.get_state()  # type: ignore[misc]
    return {
        "python": _plain(random.getstate()),
        "numpy": [kind, np.asarray(keys).copy(), pos, has_gauss, cached],
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])


def export_data(obj: object) -> dict[str, Any]:
    """The data attributes of an object (arrays, numbers, records, lists and dicts of them).

    Used for a Flower strategy's state, whose attributes fedbench does not
    know in advance: callables and other objects are configuration, skipped.
    """
    out: dict[str, Any] = {}
    for name, value in vars(obj).items():
        try:
            encode(value)
        except TypeError:
            continue
        out[name] = value
    return out


def import_data(obj: object, state: Mapping[str, Any]) -> None:
    for name, value in state.items():
        setattr(obj, name, value)


def encode(value: Any) -> Any:
    """Plain data and numpy arrays as what `torch.load(weights_only=True)` reads back."""
    if isinstance(value, np.generic):
        # Before the plain types: np.float64 is a float, but pickles as a numpy object that
        # weights_only refuses (FedAdam's moments of BatchNorm's num_batches_tracked are such
        # scalars). Kept as a 0-d tensor, it comes back as the same numpy scalar type.
        if isinstance(value, np.str_):
            return str(value)
        return {"__npscalar__": torch.from_numpy(np.asarray(value).copy())}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, ArrayRecord):
        return {
            "__arrayrecord__": {k: torch.from_numpy(v.numpy().copy()) for k, v in value.items()}
        }
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"__dict__": {k: encode(v) for k, v in value.items()}}
    if isinstance(value, torch.Tensor):
        return {"__tensor__": value}
    raise TypeError(type(value).__name__)


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return value["__ndarray__"].numpy()
        if "__npscalar__" in value:
            return value["__npscalar__"].numpy()[()]
        if "__arrayrecord__" in value:
            return ArrayRecord({k: v for k, v in value["__arrayrecord__"].items()})
        if "__tensor__" in value:
            return value["__tensor__"]
        return {k: decode(v) for k, v in value["__dict__"].items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def save(run_dir: Path, ckpt: Checkpoint) -> None:
    path = run_dir / CHECKPOINT
    tmp = path.with_suffix(".pt.tmp")
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **{k: encode(v) for k, v in ckpt.__dict__.items()}}, buffer)
    body = buffer.getvalue()
    header = f"key {key.key_id()}\nhmac {key.sign(MAC_LABEL, body)}\n".encode()
    with tmp.open("wb") as f:
        f.write(MAGIC + header)
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # a kill leaves either the old or the new checkpoint, whole


@dataclass(frozen=True)
class Sealed:
    """A checkpoint file's body and whether this user's key vouches for it."""

    body: bytes
    keyed: bool  # the HMAC verified under this user's key
    problem: str  # why not, when not: one line naming the file

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


def unseal(path: Path) -> Sealed:
    """The body of `path` and whether its HMAC verifies (nothing of the body is parsed)."""
    data = bounded.read_capped(path, str(path), bounded.CHECKPOINT)  # a sparse 1 TB costs 0 B
    if not data.startswith(MAGIC):
        if data[:2] != b"PK":  # not even torch.save's zip
            return Sealed(data, False, f"{path} is not a readable fedbench checkpoint (no header)")
        why = "a checkpoint of an older fedbench (or plain torch.save), written without a key"
        return Sealed(data, False, f"{path}: {why}; fedbench cannot verify it ({UNTRUSTED_HINT})")
    rest = data[len(MAGIC) :]
    lines = rest.split(b"\n", 2)
    if len(lines) < 3 or not lines[0].startswith(b"key ") or not lines[1].startswith(b"hmac "):
        return Sealed(b"", False, f"{path}: damaged checkpoint header")
    written_by = lines[0][4:].decode(errors="replace")
    mac, body = lines[1][5:].decode(errors="replace"), lines[2]
    if written_by != key.key_id():
        return Sealed(
            body,
            False,
            f"{path}: written under another account's fedbench key ({written_by}; this "
            f"account's is {key.key_id()}, {key.secret_path()}), so fedbench cannot verify "
            f"that nobody edited it ({UNTRUSTED_HINT})",
        )
    if not key.verify(MAC_LABEL, body, mac):
        return Sealed(
            body,
            False,
            f"{path}: its HMAC does not match: the file was changed after fedbench wrote it "
            f"(or rounds.csv's fingerprint in it was recomputed); refused ({UNTRUSTED_HINT})",
        )
    return Sealed(body, True, "")


def load(run_dir: Path, accept: str | None = None) -> Checkpoint | None:
    """The checkpoint in `run_dir`, if its HMAC verifies under this user's key.

    An unkeyed (or foreign-keyed) one loads only if its body's SHA-256 is
    `accept` (default: `FEDBENCH_ACCEPTED_CHECKPOINT`, what the driver accepted).
    """
    path = run_dir / CHECKPOINT
    if not path.exists():
        return None
    sealed = unseal(path)
    accept = accept if accept is not None else os.environ.get(ACCEPTED_ENV)
    if not sealed.keyed and not (accept and sealed.body and sealed.digest == accept):
        raise FedbenchError(sealed.problem)
    return parse(path, sealed.body)


def parse(path: Path, body: bytes) -> Checkpoint:
    """A checkpoint body, read as tensors and plain data only."""
    try:
        data = torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user-facing problem
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FedbenchError(
            f"{path} is not a readable fedbench checkpoint ({first[:200]}); only tensors and "
            "plain data load, nothing that could run code"
        ) from None
    # Format 2 is the same body without the keyed header (accepted only explicitly).
    if not isinstance(data, dict) or data.get("format") not in (2, FORMAT):
        raise FedbenchError(f"{path} is not a fedbench checkpoint of format {FORMAT}")
    data.pop("format")
    try:
        return Checkpoint(**{k: decode(v) for k, v in data.items()})
    except (TypeError, KeyError, AttributeError, ValueError) as exc:
        raise FedbenchError(
            f"{path} is not a fedbench checkpoint of format {FORMAT} ({exc})"
        ) from None


def _shape(tensor: torch.Tensor) -> str:
    """`32x1x5x5 float32` (a scalar: `scalar int64`)."""
    dims = "x".join(str(d) for d in tensor.shape) or "scalar"
    return f"{dims} {str(tensor.dtype).removeprefix('torch.')}"


def check_model(path: Path, arrays: Mapping[str, Any], model: Mapping[str, torch.Tensor]) -> None:
    """Refuse `arrays` (a checkpoint's model) unless they are `model`'s state: the same
    names, shapes and dtypes, naming the first array that differs.

    `model` is the state of the network the run folder's config builds (built on the
    meta device: shapes and dtypes, no memory). HMAC and finiteness say nothing of
    this: another model's checkpoint, signed under this user's key, passed every other
    check and failed only when the server loaded it into the network, mid-run.
    """
    if not isinstance(arrays, Mapping) or not arrays:
        raise FedbenchError(f"{path}: holds no model; refused")
    why = (
        "a checkpoint of another model, not this folder's run; refused (restore the "
        "folder's own checkpoint.pt, or start a new run)"
    )
    for name, want in model.items():
        have = arrays.get(name)
        if have is None:
            raise FedbenchError(
                f"{path}: holds no model array {name!r}, which the folder's model "
                f"(config.yaml) has as {_shape(want)}: {why}"
            )
        if not isinstance(have, torch.Tensor):
            raise FedbenchError(f"{path}: model array {name!r} is not a tensor; refused")
        if have.shape != want.shape or have.dtype != want.dtype:
            raise FedbenchError(
                f"{path}: model array {name!r} is {_shape(have)}, but the folder's model "
                f"(config.yaml) has it as {_shape(want)}: {why}"
            )
    extra = [name for name in arrays if name not in model]
    if extra:
        more = f" (+{len(extra) - 1} more)" if len(extra) > 1 else ""
        raise FedbenchError(
            f"{path}: model array {extra[0]!r} is not an array of the folder's model "
            f"(config.yaml){more}: {why}"
        )
