"""tree-at-batch on the shapes the fixtures cannot show by a golden alone: which findings
carry no fix, which fixes are unsafe, and where a chain is reported at all."""

from __future__ import annotations

import textwrap

from jaxlint._engine import analyze
from jaxlint._rule import Applicability
from rules.tree_at_batch import TreeAtBatch


# A chain is reported where it runs many times: `f` is called on every step of a data loop.
_DRIVER = "\n\nfor batch in loader:\n    f(*batch)\n"


def _findings(source: str):  # type: ignore[no-untyped-def]
    code = "import equinox as eqx\n\n" + textwrap.dedent(source) + _DRIVER
    result = analyze("case.py", code.encode(), [TreeAtBatch], {}).result
    assert result.error is None, result.error
    return result.findings


def _applicability(source: str) -> str | None:
    (finding,) = _findings(source)
    return finding.fix  # "safe", "unsafe", or None without a fix


def test_return_chain_is_safe() -> None:
    assert _applicability(
        """
        def f(m, a, b):
            m = eqx.tree_at(lambda t: t.a, m, a)
            return eqx.tree_at(lambda t: t.b, m, b)
        """
    ) == Applicability.SAFE.value


def test_return_chain_seen_by_a_closure_has_no_fix() -> None:
    assert _applicability(
        """
        def f(m, a, b):
            def peek():
                return m
            m = eqx.tree_at(lambda t: t.a, m, a)
            return eqx.tree_at(lambda t: t.b, m, b)
        """
    ) is None


def test_return_chain_in_try_has_no_fix() -> None:
    assert _applicability(
        """
        def f(m, a, b):
            try:
                m = eqx.tree_at(lambda t: t.a, m, a)
                return eqx.tree_at(lambda t: t.b, m, b)
            finally:
                print(m)
        """
    ) is None


def test_attribute_chain_is_unsafe() -> None:
    assert _applicability(
        """
        class C:
            def f(self, a, b, loader):
                for batch in loader:
                    self.m = eqx.tree_at(lambda t: t.a, self.m, a)
                    self.m = eqx.tree_at(lambda t: t.b, self.m, b)
        """
    ) == Applicability.UNSAFE.value


def test_attribute_chain_reading_a_replaced_path_has_no_fix() -> None:
    assert _applicability(
        """
        class C:
            def f(self, a, loader):
                for batch in loader:
                    self.m = eqx.tree_at(lambda t: t.a, self.m, a)
                    self.m = eqx.tree_at(lambda t: t.b, self.m, self.m.a.x)
        """
    ) is None


def test_attribute_loop_using_the_object_elsewhere_has_no_fix() -> None:
    assert _applicability(
        """
        class C:
            def f(self, steps):
                for i in range(steps):
                    self.m = eqx.tree_at(lambda t: t.layers[i].w, self.m, 0)
                    self.step()
        """
    ) is None


def test_renamed_chain_with_intermediate_returned_is_silent() -> None:
    assert _findings(
        """
        def f(m, a, b):
            m1 = eqx.tree_at(lambda t: t.a, m, a)
            m2 = eqx.tree_at(lambda t: t.b, m1, b)
            return m1, m2
        """
    ) == []


def test_chain_run_once_is_silent() -> None:
    """Set-up (a model built, weights loaded): no loop runs the chain, so it is paid once."""
    code = "import equinox as eqx\n\n" + textwrap.dedent(
        """
        def init(m, a, b):
            m = eqx.tree_at(lambda t: t.a, m, a)
            return eqx.tree_at(lambda t: t.b, m, b)


        def main(m, a, b):
            return init(m, a, b)
        """
    )
    assert analyze("case.py", code.encode(), [TreeAtBatch], {}).result.findings == []


def test_chain_says_how_it_repeats() -> None:
    (finding,) = _findings(
        """
        def f(m, a, b):
            m = eqx.tree_at(lambda t: t.a, m, a)
            return eqx.tree_at(lambda t: t.b, m, b)
        """
    )
    assert finding.evidence and "on every iteration of the loop" in finding.evidence[0]
