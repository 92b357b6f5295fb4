"""fedbench's layers, bottom to top, and the import graph that must respect them.

A module may import its own layer and the layers below it, never one above,
and no chain of imports may come back to where it started. Every import
statement counts: module level, inside functions, and under TYPE_CHECKING,
so a circle cannot hide in a lazy import. tests/test_layers.py fails on a
circle or an upward import, naming the file, line and both modules.

    python -m fedbench.layers          # check, and rewrite the graph in docs/architecture.md

A unit is a package of fedbench (`fedbench.server`), a top-level module
(`fedbench.ledger`) or `strategies`: the boxes of the picture. Units may not
import each other in a circle either. A `__main__` module is an entry point
whatever its package: it sits in the top layer, as its own unit.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layer:
    name: str
    units: tuple[str, ...]  # packages or modules (a module's longest listed prefix wins)
    holds: str  # what belongs here


# Bottom to top. A new package goes into the lowest layer whose modules it needs.
LAYERS: tuple[Layer, ...] = (
    Layer(
        "core",
        ("fedbench", "fedbench.core", "fedbench.errors", "fedbench.paths"),
        "value types and base classes every layer shares: the device spec and state, "
        "plans, workloads, the meter interface and Cost, the RoundReport and its keys, "
        "Seating; user errors; where files live",
    ),
    Layer(
        "libraries",
        (
            "fedbench.arrays",
            "fedbench.cli",
            "fedbench.data",
            "fedbench.folders",
            "fedbench.measure",
            "fedbench.models",
            "fedbench.security",
            "fedbench.trust",
        ),
        "building blocks that know no device and no experiment: arrays on the wire, the "
        "key=value grammar, data sets, folders and files a user names, workload measurement "
        "and probes, models, keys and TLS, "
        "what fedbench trusts from disk (per-user key, `_target_` allowlist, safe unpickling)",
    ),
    Layer(
        "devices",
        ("fedbench.devices",),
        "one device's cost: profiles, the emulator, the meters and make_meter",
    ),
    Layer(
        "train",
        ("fedbench.algorithms", "fedbench.train"),
        "local training on one device: the loop, the optimizer, the memory planner, batched "
        "training; algorithms with a client half (the registry of train config keys)",
    ),
    Layer(
        "experiment",
        ("fedbench.experiment",),
        "the typed experiment (one frozen dataclass per config group, `_target_` groups) "
        "and the fleet it expands to",
    ),
    Layer(
        "federation",
        (
            "fedbench.ledger",
            "fedbench.population",
            "fedbench.protocol",
            "fedbench.report",
            "fedbench.scenarios",
        ),
        "what the federation is made of: population draws, scenarios and their data, "
        "the wire protocol, the ledger, the run folder's records",
    ),
    Layer(
        "analysis",
        ("fedbench.analyze",),
        "figures and tables of finished run folders and sweeps (the multirun's callback)",
    ),
    Layer(
        "selection",
        ("strategies",),
        "device-selection strategies, one per file",
    ),
    Layer(
        "runtime",
        ("fedbench.runtime",),
        "where devices run: the runtimes (simulation, deployment), their processes, "
        "limits and seatings; a runtime runs the apps it is handed",
    ),
    Layer(
        "apps",
        ("fedbench.client", "fedbench.server"),
        "the ClientApp (the device mod) and the ServerApp (round loop, FleetStrategy)",
    ),
    Layer(
        "entry points",
        (
            "fedbench.__main__",
            "fedbench.bench",
            "fedbench.cli.gate",
            "fedbench.characterize",
            "fedbench.device",
            "fedbench.fleet",
            "fedbench.layers",
            "fedbench.preflight",
            "fedbench.profile_device",
            "fedbench.profiling",
            "fedbench.resume",
        ),
        "commands (python -m ...): a run, its gate (Hydra's callback), preflight and resume, "
        "the bench, "
        "characterisation, device profiling, a physical device joining, the fleet's "
        "description; every `__main__` module",
    ),
)
ENTRY_LAYER = len(LAYERS) - 1


@dataclass(frozen=True)
class Import:
    """One import statement's arrow: `source` imports `target` at `file:line`."""

    source: str
    target: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.source} -> {self.target}"


def modules(root: Path) -> dict[str, Path]:
    """Every module of fedbench and strategies under `root`, by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted([*root.glob("fedbench/**/*.py"), *root.glob("strategies/*.py")]):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(root: Path, mods: Mapping[str, Path]) -> list[Import]:
    """Every import of one module of `mods` by another, wherever the statement is."""
    out: list[Import] = []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                # `from pkg import mod` imports the module pkg.mod as well as pkg.
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            for target in targets:
                if target in mods and target != name:
                    out.append(Import(name, target, rel, node.lineno))
    return out


def _covers(unit: str, module: str) -> bool:
    # The root package stands for fedbench/__init__.py only, not for everything under it.
    return module == unit or (unit != "fedbench" and module.startswith(unit + "."))


def unit_of(module: str) -> str | None:
    """The box a module is drawn in: its longest listed prefix; a `__main__` alone."""
    if module.rpartition(".")[2] == "__main__":
        return module
    units = [u for layer in LAYERS for u in layer.units if _covers(u, module)]
    return max(units, key=len) if units else None


def layer_of(module: str) -> int:
    """The index in LAYERS of the module's layer (-1: none lists it)."""
    unit = unit_of(module)
    if unit is None:
        return -1
    if unit == module and unit.rpartition(".")[2] == "__main__":
        return ENTRY_LAYER
    return next(i for i, layer in enumerate(LAYERS) if unit in layer.units)


def unlisted(mods: Iterable[str]) -> list[str]:
    return sorted(m for m in mods if layer_of(m) < 0)


def upward(edges: Iterable[Import]) -> list[Import]:
    """Imports of a higher layer than the importer's."""
    return [e for e in edges if layer_of(e.target) > layer_of(e.source)]


def cycles(edges: Iterable[Import], key: str = "module") -> list[list[Import]]:
    """One circle of imports through each strongly connected group, as its arrows.

    `key` "module" finds circles between modules; "unit" between units
    (packages), where an arrow stands for any import between the two.
    """
    by: dict[str, dict[str, Import]] = defaultdict(dict)
    for e in edges:
        a, b = (e.source, e.target) if key == "module" else (unit_of(e.source), unit_of(e.target))
        if a is not None and b is not None and a != b:
            by[a].setdefault(b, e)
    circles = []
    for group in _components(by):
        if len(group) > 1:
            circles.append(_circle(by, min(group), group))
    return circles


def _components(graph: Mapping[str, Mapping[str, Import]]) -> list[set[str]]:
    """Strongly connected components (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    nodes = sorted(set(graph) | {b for bs in graph.values() for b in bs})
    for start in nodes:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = set()
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        group.add(x)
                        if x == v:
                            break
                    out.append(group)
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph.get(w, {})))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def _circle(graph: Mapping[str, Mapping[str, Import]], start: str, group: set[str]) -> list[Import]:
    """The shortest path from `start` back to itself inside `group`, as arrows."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, {})):
                if w not in group or w in previous:
                    continue
                previous[w] = v
                if w == start:
                    path = [start]
                    while path[-1] != start or len(path) == 1:
                        path.append(previous[path[-1]])
                    path.reverse()
                    return [graph[a][b] for a, b in zip(path, path[1:], strict=False)]
                following.append(w)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected group without a circle")


def problems(root: Path) -> list[str]:
    """Every breach of the layering under `root`, one line each (none: the tree is clean)."""
    mods = modules(root)
    edges = imports(root, mods)
    lines = [f"{m}: in no layer of fedbench.layers.LAYERS" for m in unlisted(mods)]
    edges = [e for e in edges if layer_of(e.source) >= 0 and layer_of(e.target) >= 0]
    for e in upward(edges):
        lines.append(
            f"upward import {e} ({LAYERS[layer_of(e.source)].name} -> "
            f"{LAYERS[layer_of(e.target)].name})"
        )
    for key in ("module", "unit"):
        for circle in cycles(edges, key):
            lines.append(f"{key} circle: " + "; ".join(str(e) for e in circle))
    return lines


def unit_graph(root: Path) -> dict[str, set[str]]:
    """unit -> the units it imports, over every import."""
    graph: dict[str, set[str]] = defaultdict(set)
    mods = modules(root)
    for m in mods:
        unit = unit_of(m)
        if unit is not None:
            graph.setdefault(unit, set())
    for e in imports(root, mods):
        a, b = unit_of(e.source), unit_of(e.target)
        if a is not None and b is not None and a != b:
            graph[a].add(b)
    return dict(graph)


def reduced(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The arrows no longer path implies (transitive reduction of an acyclic graph)."""
    reach: dict[str, set[str]] = {}

    def below(v: str) -> set[str]:
        if v not in reach:
            reach[v] = set()
            for w in graph.get(v, ()):
                reach[v] |= {w, *below(w)}
        return reach[v]

    return {
        v: {w for w in ws if not any(w in below(u) for u in ws if u != w)}
        for v, ws in graph.items()
    }


def _short(unit: str) -> str:
    return unit.removeprefix("fedbench.") if unit != "fedbench" else "fedbench/__init__"


def mermaid(root: Path) -> str:
    """The unit graph as a Mermaid flowchart: one box per layer, top layer first."""
    graph = reduced(unit_graph(root))
    ids = {u: f"u{i}" for i, u in enumerate(sorted(graph))}
    out = ["```mermaid", "flowchart TB"]
    for i in reversed(range(len(LAYERS))):
        members = sorted(u for u in graph if layer_of(u) == i)
        out.append(f'  subgraph L{i}["{LAYERS[i].name}"]')
        out.extend(f'    {ids[u]}["{_short(u)}"]' for u in members)
        out.append("  end")
    for v in sorted(graph):
        out.extend(f"  {ids[v]} --> {ids[w]}" for w in sorted(graph[v]))
    out.append("```")
    return "\n".join(out) + "\n"


def table() -> str:
    """LAYERS as a Markdown table, top layer first."""
    rows = ["| layer | units | what belongs there |", "|---|---|---|"]
    for layer in reversed(LAYERS):
        units = ", ".join(f"`{_short(u)}`" for u in layer.units)
        rows.append(f"| {layer.name} | {units} | {layer.holds} |")
    return "\n".join(rows) + "\n"


BEGIN = "<!-- import graph: python -m fedbench.layers writes it -->"
END = "<!-- end of import graph -->"


def with_graph(doc: str, root: Path) -> str:
    """`doc` with the text between BEGIN and END replaced by the layers and the current graph."""
    head, sep, rest = doc.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"no {BEGIN!r} ... {END!r} block to write the graph into")
    return f"{head}{BEGIN}\n{table()}\n{mermaid(root)}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[1]
    found = problems(root)
    for line in found:
        print(line, file=sys.stderr)
    doc = root / "docs" / "architecture.md"
    text = doc.read_text()
    current = with_graph(text, root)
    if current != text:
        doc.write_text(current)
        print(f"wrote the import graph into {doc}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
