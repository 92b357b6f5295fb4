"""Every bad input in the catalogue gets one clear error naming what is wrong."""

from __future__ import annotations

import pytest

from tests.bad_inputs import CASES, Case, run_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_gives_a_clear_error(case: Case) -> None:
    message = run_case(case)
    for text in case.expect:
        assert text in message, f"{case.name}: {text!r} not in {message!r}"
    assert "\n" not in message.strip() and "Traceback" not in message


def test_the_catalogue_is_large_enough() -> None:
    assert len(CASES) >= 25
