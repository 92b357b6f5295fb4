"""The README documents every study's CSV columns exactly as the study declares them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.characterize.output import columns_markdown
from fedbench.characterize.registry import build_study, study_names

README = Path(__file__).resolve().parents[2] / "experiments" / "characterization" / "README.md"


@pytest.mark.parametrize("study", study_names())
def test_readme_has_the_columns_table(study: str) -> None:
    text = README.read_text()
    assert f"### {study}.csv\n\n{columns_markdown(build_study(study, {}).columns)}\n" in text
    assert f"study={study}" in text  # and the command that runs it
