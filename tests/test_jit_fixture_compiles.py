"""Compile counts of the runnable missing-jit and jit-in-loop fixtures, before and after the fix:
a fresh wrapper per iteration compiles per iteration, the hoisted one once; the function
missing-jit decorates compiles once for all batches of one shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxlint._bench import load_module


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _compiles(relative: str) -> dict[str, int]:
    pytest.importorskip("jax")
    from jaxlint.runtime import count_compiles

    main = load_module(FIXTURES / relative).main
    with count_compiles() as compiles:
        main()
    return compiles.by_name


def test_jit_in_loop_compiles_once_per_iteration_before_and_once_after() -> None:
    before = _compiles("jit-in-loop/bad_lambda_loop.py")
    after = _compiles("jit-in-loop/bad_lambda_loop.fixed.py")
    iterations = 3
    assert before["<lambda>"] == iterations
    assert before["scaled_tanh"] == iterations
    assert before["normalize"] == iterations
    assert after["<lambda>"] == after["scaled_tanh"] == after["normalize"] == 1


def test_a_bound_method_rewrapped_per_iteration_compiles_each_time() -> None:
    assert _compiles("jit-in-loop/bad_bound_method.py")["step"] == 3
    assert _compiles("jit-in-loop/bad_bound_method.fixed.py")["step"] == 1


def test_captured_loop_variables_become_arguments_and_compile_once() -> None:
    after = _compiles("jit-in-loop/bad_captured.fixed.py")
    assert after["<lambda>"] == 2  # one per hoisted lambda, instead of one per iteration


@pytest.mark.parametrize(
    ("relative", "function"),
    [
        ("missing-jit/bad_extraction_loop.fixed.py", "extract_activations"),
        ("missing-jit/bad_decode_loop.fixed.py", "decode_step"),
    ],
)
def test_missing_jit_fix_compiles_once_for_all_batches(relative: str, function: str) -> None:
    assert _compiles(relative)[function] == 1
