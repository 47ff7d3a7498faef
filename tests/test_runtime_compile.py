"""count_compiles / assert_max_compiles on the CPU backend (jax-facts §3)."""

from __future__ import annotations

import functools as ft
import logging
import threading

import numpy as np
import pytest


jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
jnp = jax.numpy

from jax._src import monitoring as jax_monitoring  # noqa: E402

from jaxlint.runtime import CompileCounter, assert_max_compiles, count_compiles  # noqa: E402


def _arr(n: int, dtype: type = np.float32) -> jax.Array:
    """A device array made without compiling anything (device_put of NumPy does not compile)."""
    return jax.device_put(np.ones(n, dtype))


def _jit(kind: str):  # type: ignore[no-untyped-def]
    def double(x):  # type: ignore[no-untyped-def]
        return x * 2

    return jax.jit(double) if kind == "jit" else eqx.filter_jit(double)


@pytest.mark.parametrize("kind", ["jit", "filter_jit"])
def test_new_shape_compiles_once_and_a_repeat_does_not(kind: str) -> None:
    f = _jit(kind)
    a4, a7 = _arr(4), _arr(7)
    with count_compiles() as c:
        f(a4)
        assert c.total == 1
        f(a4)
        assert c.total == 1
        f(a7)
    assert c.total == 2
    assert c.by_name == {"double": 2}
    assert c.count(f) == 2 and c.count("double") == 2
    assert c.seconds > 0 and c.cache_hits == 0


def test_aot_compile_counts_and_the_later_call_does_not() -> None:
    g = jax.jit(lambda x: x + 1)
    x = _arr(3)
    with count_compiles() as c:
        compiled = g.lower(x).compile()
    assert c.by_name == {"<lambda>": 1}
    with count_compiles() as later:
        compiled(x)
        g(x)  # jax fills its dispatch cache from the AOT executable: no event
    assert later.total == 0


def test_eager_ops_compile_under_their_primitive_name() -> None:
    x = _arr(5)
    with count_compiles() as c:
        jnp.cos(x)
        jnp.cos(x)
    assert c.by_name == {"cos": 1}
    with count_compiles() as c:
        jnp.ones(11)  # array creation compiles too
    assert c.total >= 1 and "broadcast_in_dim" in c.by_name


def test_names_strip_the_jit_wrapper_and_follow_partials() -> None:
    def scale(x, k):  # type: ignore[no-untyped-def]
        return x * k

    part = jax.jit(ft.partial(scale, k=3.0))
    with count_compiles() as c:
        part(_arr(2))
    assert c.by_name == {"scale": 1}
    assert c.count(part) == 1 and c.count(ft.partial(scale, k=1.0)) == 1
    with pytest.raises(TypeError, match="name"):
        c.count(object())  # type: ignore[arg-type]


def test_nested_counters_both_count() -> None:
    f = _jit("jit")
    with count_compiles() as outer:
        f(_arr(2))
        with count_compiles() as inner:
            f(_arr(3))
    assert inner.by_name == {"double": 1}
    assert outer.by_name == {"double": 2}


def test_listeners_are_unregistered_on_exit_even_after_an_exception() -> None:
    durations = len(jax_monitoring.get_event_duration_listeners())
    events = len(jax_monitoring.get_event_listeners())
    f = _jit("jit")
    with pytest.raises(ZeroDivisionError):
        with count_compiles() as c:
            f(_arr(2))
            assert len(jax_monitoring.get_event_duration_listeners()) == durations + 1
            1 / 0  # noqa: B018
    assert len(jax_monitoring.get_event_duration_listeners()) == durations
    assert len(jax_monitoring.get_event_listeners()) == events
    f(_arr(9))
    assert c.total == 1  # frozen after exit


def test_a_counter_counts_one_block() -> None:
    c = count_compiles()
    with c:
        pass
    with pytest.raises(RuntimeError, match="one `with` block"):
        with c:
            pass


def test_other_threads_count_unless_this_thread() -> None:
    f = _jit("jit")
    x = _arr(6)
    with count_compiles() as everywhere, count_compiles(this_thread=True) as mine:
        t = threading.Thread(target=f, args=(x,))
        t.start()
        t.join()
    assert everywhere.total == 1
    assert mine.total == 0


def test_concurrent_compiles_are_all_counted() -> None:
    fns = [_jit("jit") for _ in range(4)]
    arrays = [_arr(n) for n in range(20, 24)]
    with count_compiles() as c:
        threads = [threading.Thread(target=fn, args=(a,)) for fn in fns for a in arrays]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert c.total == 16


def test_persistent_cache_hits_are_not_compiles(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from jax._src import compilation_cache

    options = {
        "jax_compilation_cache_dir": str(tmp_path),
        "jax_persistent_cache_min_compile_time_secs": 0.0,
        "jax_persistent_cache_min_entry_size_bytes": 0,
    }
    saved = {k: getattr(jax.config, k) for k in options}

    def cached(x):  # type: ignore[no-untyped-def]
        return jnp.sin(x) * 3

    x = _arr(5)
    try:
        for k, v in options.items():
            jax.config.update(k, v)
        compilation_cache.reset_cache()
        with count_compiles() as miss:
            jax.jit(cached)(x)
        jax.clear_caches()  # forget the in-memory executable; the disk copy remains
        with count_compiles() as hit:
            jax.jit(cached)(x)
    finally:
        for k, v in saved.items():
            jax.config.update(k, v)
        compilation_cache.reset_cache()
    assert miss.by_name == {"cached": 1} and miss.cache_hits == 0
    assert hit.total == 0 and hit.cache_hits_by_name == {"cached": 1}


# -- assert_max_compiles --------------------------------------------------------------------


def test_assert_max_compiles_passes_at_the_limit() -> None:
    f = _jit("jit")
    with assert_max_compiles(1, name=f) as c:
        f(_arr(4))
        f(_arr(4))
        jnp.ones(13)  # other functions' compiles do not count with name=
    assert isinstance(c, CompileCounter) and c.count(f) == 1


def test_assert_max_compiles_names_the_function_and_why() -> None:
    f = _jit("jit")
    with pytest.raises(AssertionError) as info:
        with assert_max_compiles(1, name="double"):
            f(_arr(4))
            f(_arr(7))
    message = str(info.value)
    assert "'double' compiled 2 times, more than the 1 allowed" in message
    assert "double x2" in message
    assert "now f32[7] and before f32[4]" in message
    assert __file__ in message  # the call site, not jaxlint's own frames


def test_assert_max_compiles_without_name_counts_the_whole_block() -> None:
    f = _jit("jit")
    with pytest.raises(AssertionError, match="the block compiled 2 times"):
        with assert_max_compiles(1):
            f(_arr(31))
            jnp.cos(_arr(31))


@pytest.mark.parametrize("kind", ["jit", "filter_jit"])
def test_assert_max_compiles_as_a_decorator_accumulates_over_calls(kind: str) -> None:
    step = assert_max_compiles(1)(_jit(kind))
    step(_arr(4))
    step(_arr(4))
    with pytest.raises(AssertionError) as info:
        step(_arr(8))
    assert "compiled 2 times" in str(info.value) and "double" in str(info.value)
    assert "now f32[8] and before f32[4]" in str(info.value)


def test_decorator_without_name_names_the_decorated_function() -> None:
    @assert_max_compiles(0)
    def outer(x):  # type: ignore[no-untyped-def]
        return jnp.cos(x)

    with pytest.raises(AssertionError, match="outer.*compiled 1 time,"):
        outer(_arr(17))


def test_assert_max_compiles_restores_config_and_logging_and_keeps_exceptions() -> None:
    logger = logging.getLogger("jax._src.interpreters.partial_eval")
    handlers = list(logger.handlers)
    f = _jit("jit")
    with pytest.raises(KeyError):  # not masked by the over-limit AssertionError
        with assert_max_compiles(0):
            assert jax.config.jax_explain_cache_misses
            f(_arr(2))
            raise KeyError("boom")
    assert not jax.config.jax_explain_cache_misses
    assert logger.handlers == handlers


def test_assert_max_compiles_rejects_a_negative_limit() -> None:
    with pytest.raises(ValueError, match="n must be"):
        assert_max_compiles(-1)


@pytest.mark.parametrize("name", ["count_compiles", "assert_max_compiles"])
def test_docstring_examples_run(name: str, run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    import jaxlint.runtime as runtime

    run_doc_examples(getattr(runtime, name))
