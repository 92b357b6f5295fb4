"""Layers import downward only and no imports go round in a circle (fedbench.layers)."""

from __future__ import annotations

from pathlib import Path

from fedbench import layers

ROOT = Path(__file__).resolve().parents[1]


def test_no_circle_and_no_upward_import() -> None:
    found = layers.problems(ROOT)
    assert not found, "\n" + "\n".join(found)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_check_counts_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "fedbench/__init__.py": "",
            "fedbench/core/__init__.py": "",
            "fedbench/core/spec.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from fedbench.server.loop import Loop\n"
                "def run():\n"
                "    from fedbench.server import loop\n"
            ),
            "fedbench/server/__init__.py": "",
            "fedbench/server/loop.py": "from ..core import spec\nclass Loop: ...\n",
            "fedbench/newthing.py": "import fedbench.core.spec\n",
        },
    )
    found = layers.problems(root)
    assert found[0] == "fedbench.newthing: in no layer of fedbench.layers.LAYERS"
    upward = [line for line in found if line.startswith("upward")]
    assert upward == [
        "upward import fedbench/core/spec.py:3: fedbench.core.spec -> fedbench.server.loop "
        "(core -> apps)",
        "upward import fedbench/core/spec.py:5: fedbench.core.spec -> fedbench.server "
        "(core -> apps)",
        "upward import fedbench/core/spec.py:5: fedbench.core.spec -> fedbench.server.loop "
        "(core -> apps)",
    ]
    circles = [line for line in found if "circle" in line]
    assert circles == [
        "module circle: fedbench/core/spec.py:3: fedbench.core.spec -> fedbench.server.loop; "
        "fedbench/server/loop.py:1: fedbench.server.loop -> fedbench.core.spec",
        "unit circle: fedbench/core/spec.py:3: fedbench.core.spec -> fedbench.server.loop; "
        "fedbench/server/loop.py:1: fedbench.server.loop -> fedbench.core",
    ]


def test_a_main_module_is_an_entry_point_of_its_own(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "fedbench/__init__.py": "",
            "fedbench/analyze/__init__.py": "",
            "fedbench/analyze/__main__.py": "from fedbench.server import app\n",
            "fedbench/server/__init__.py": "",
            "fedbench/server/app.py": "from fedbench import analyze\n",
        },
    )
    assert layers.problems(root) == []
    assert layers.unit_graph(root)["fedbench.analyze.__main__"] == {"fedbench.server"}


def test_every_layer_holds_what_it_says() -> None:
    units = [u for layer in layers.LAYERS for u in layer.units]
    assert len(units) == len(set(units)), "a unit listed in two layers"
    assert all(layer.holds for layer in layers.LAYERS)
    present = set(layers.unit_graph(ROOT))
    assert set(units) <= present, f"listed but not in the tree: {set(units) - present}"


def test_the_import_graph_in_the_docs_is_current() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert layers.with_graph(doc, ROOT) == doc, (
        "docs/architecture.md's import graph is out of date: run `python -m fedbench.layers`"
    )
