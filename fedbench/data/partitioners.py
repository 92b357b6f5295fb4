"""Flower Datasets' horizontal partitioners, each reachable as `data.partition.scheme=<name>`.

Every horizontal partitioner class of `flwr_datasets.partitioner` is a scheme,
named after its class (`InnerDirichletPartitioner` -> `inner_dirichlet`), so a
partitioner a newer flwr-datasets adds is reachable without code here. Left
out, with the reason a user sees when naming them:

- `IdToSizeFncPartitioner` takes a Python function, which a config file
  cannot hold; its config-shaped forms are `linear`, `square`, `exponential`.
- `VerticalEvenPartitioner`, `VerticalSizePartitioner` split the columns
  (features) between parties, not the examples between devices.

fedbench supplies `num_partitions` (the fleet's size) and `seed` (the
experiment's seed); every other constructor parameter is a key of
`data.partition`, checked against the chosen class's own signature. As
`FederatedDataset` does, the pool is shuffled with the seed before the
partitioner sees it; the partitioner then reads two columns: `label`, and
`natural_id` (each example's owner) when the data has one.

Importing flwr-datasets costs a process about 2 s and 200 MB (it imports
`datasets`, matplotlib and seaborn), so it happens here, on first use only.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import re
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbench.errors import FedbenchError, choices, closest

LABEL = "label"
NATURAL_ID = "natural_id"
_ROW = "_fedbench_row"  # each shuffled row's position in the pool

# fedbench gives these: the fleet decides how many, the experiment seeds them.
SUPPLIED = frozenset({"num_partitions", "seed"})

EXCLUDED: dict[str, str] = {
    "Partitioner": "the abstract base class",
    "IdToSizeFncPartitioner": (
        "it takes a Python function, which a config cannot hold; use linear, square or exponential"
    ),
    "VerticalEvenPartitioner": "it splits columns between parties (vertical FL), not examples",
    "VerticalSizePartitioner": "it splits columns between parties (vertical FL), not examples",
}


def scheme_name(class_name: str) -> str:
    """`InnerDirichletPartitioner` -> `inner_dirichlet`: the scheme a class is reached by."""
    stem = class_name.removesuffix("Partitioner")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()


def library_schemes() -> dict[str, type]:
    """Scheme name -> partitioner class, for every horizontal partitioner in flwr-datasets."""
    import flwr_datasets.partitioner as library

    found: dict[str, type] = {}
    for name, obj in vars(library).items():
        if (
            inspect.isclass(obj)
            and issubclass(obj, library.Partitioner)
            and name not in EXCLUDED
            and not inspect.isabstract(obj)
        ):
            found[scheme_name(name)] = obj
    return dict(sorted(found.items()))


def excluded_schemes() -> dict[str, str]:
    """Scheme names of the library's classes fedbench does not offer, with why."""
    return {scheme_name(k): v for k, v in EXCLUDED.items() if k != "Partitioner"}


def parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The constructor parameters of `cls` a user sets (all but `self` and SUPPLIED)."""
    signature = inspect.signature(cls)
    return {
        name: p
        for name, p in signature.parameters.items()
        if name != "self"
        and name not in SUPPLIED
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def _scheme_class(scheme: str, extra: tuple[str, ...]) -> type:
    schemes = library_schemes()
    if scheme in schemes:
        return schemes[scheme]
    if scheme in excluded_schemes():
        raise FedbenchError(
            f"data.partition.scheme={scheme!r}: not offered, because {excluded_schemes()[scheme]}"
        )
    valid = [*schemes, *extra]
    raise FedbenchError(
        f"data.partition.scheme={scheme!r}: unknown{closest(scheme, valid)} "
        f"(valid: {choices(valid)})"
    )


def _arguments(scheme: str, cls: type, params: Mapping[str, Any], has_ids: bool) -> dict[str, Any]:
    """The keyword arguments for `cls`: the set keys, checked, plus partition_by's default."""
    accepted = parameters(cls)
    given = {k: v for k, v in params.items() if v is not None}
    for key in given:
        if key not in accepted:
            raise FedbenchError(
                f"data.partition.{key}={given[key]!r}: not a parameter of scheme {scheme} "
                f"(its parameters: {choices(accepted) or 'none'}); set it to null"
            )
    missing = [
        k
        for k, p in accepted.items()
        if p.default is p.empty and k not in given and k != "partition_by"
    ]
    if missing:
        raise FedbenchError(
            f"data.partition.scheme={scheme}: needs data.partition.{missing[0]} "
            f"(its parameters: {choices(accepted)})"
        )
    args = {k: _library_value(k, v) for k, v in given.items()}
    if "partition_by" in accepted:
        natural = "natural_id" in scheme
        args.setdefault("partition_by", NATURAL_ID if natural else LABEL)
        columns = [LABEL, NATURAL_ID] if has_ids else [LABEL]
        if natural and not has_ids:
            raise FedbenchError(
                f"data.partition.scheme={scheme}: this data has no natural owners (writers, roles, "
                "speakers); use data=femnist, shakespeare, speech_commands or data=hf with "
                "data.source.id_column, or a label-based scheme such as iid or dirichlet"
            )
        if args["partition_by"] not in columns:
            raise FedbenchError(
                f"data.partition.partition_by={args['partition_by']!r}: this data has the columns "
                f"{choices(columns)}" + ("" if has_ids else " (its source gives no natural ids)")
            )
    return args


def _library_value(key: str, value: Any) -> Any:
    """Config values (tuples from the frozen config) as the library's types expect."""
    if isinstance(value, tuple | list):
        # distribution_array must be an ndarray; the other sequences accept lists.
        return np.asarray(value) if key == "distribution_array" else list(value)
    return value


def draw(
    labels: np.ndarray,
    ids: np.ndarray | None,
    num_partitions: int,
    scheme: str,
    params: Mapping[str, Any],
    seed: int,
    extra: tuple[str, ...] = (),
) -> list[np.ndarray]:
    """The library's partitions of a pool with `labels` (and owners `ids`), as pool positions.

    The pool is shuffled with `seed` (as `FederatedDataset` shuffles before
    partitioning), so even the partitioners without a seed of their own
    (`iid`, `size`, `natural_id`, ...) give each seed its own draw. A scheme
    whose partition count the data decides (`natural_id`: one per owner)
    must match the fleet's `num_partitions`, or the user is told both.
    `extra` are fedbench's own scheme names, listed when `scheme` is unknown.
    """
    from datasets import Dataset

    cls = _scheme_class(scheme, extra)
    args = _arguments(scheme, cls, params, ids is not None)
    order = np.random.default_rng(seed).permutation(labels.size)
    columns: dict[str, Any] = {LABEL: labels[order], _ROW: order}
    if ids is not None:
        columns[NATURAL_ID] = ids[order]
    accepted = inspect.signature(cls).parameters
    if "num_partitions" in accepted:
        args["num_partitions"] = num_partitions
    if "seed" in accepted:
        args["seed"] = seed
    try:
        with _quiet(scheme):
            return _load_all(cls(**args), Dataset.from_dict(columns), scheme, num_partitions)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        # The library's own checks (alpha > 0, sizes that fit, ...) in one line.
        message = " ".join(str(e).split()) or type(e).__name__
        raise FedbenchError(
            f"data.partition.scheme={scheme} over {labels.size} examples and "
            f"{num_partitions} devices: {message}"
        ) from e


def _load_all(partitioner: Any, dataset: Any, scheme: str, num_partitions: int) -> list[np.ndarray]:
    partitioner.dataset = dataset
    count = partitioner.num_partitions
    _check_count(scheme, count, num_partitions)
    return [
        np.sort(np.asarray(partitioner.load_partition(i)[_ROW], dtype=np.int64))
        for i in range(count)
    ]


@contextlib.contextmanager
def _quiet(scheme: str) -> Any:
    """Hide the library's progress bars and pyarrow's deprecation notes; keep its warnings.

    A library warning (e.g. pathological leaving a class unused) is the
    user's to see, so it is re-issued in one line that names the scheme.
    """
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("always")
        yield
    for w in caught:
        if issubclass(w.category, UserWarning) and "flwr_datasets" in w.filename:
            text = " ".join(str(w.message).split())
            warnings.warn(f"data.partition.scheme={scheme}: {text}", UserWarning, stacklevel=4)


def _check_count(scheme: str, count: int, num_partitions: int) -> None:
    if count != num_partitions:
        raise FedbenchError(
            f"data.partition.scheme={scheme}: the data gives {count} partitions but the fleet has "
            f"{num_partitions} devices; make them equal, e.g. +fleet.scale={count}"
        )
