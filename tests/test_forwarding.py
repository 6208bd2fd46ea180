"""ampcore.forwarding.exact_wrapper: a wrapper with its target's exact parameters behaves as the target."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from ampcore.forwarding import exact_wrapper

COUNTING = """\
_calls.append(1)
return {call}
"""


def _wrapped(fn):
    calls: list[int] = []
    return exact_wrapper(fn, COUNTING, {"_calls": calls}), calls


def test_positional_keyword_and_defaults_pass_through() -> None:
    def sum_(x, axes, keepdims=False, *, scale=1.0):
        return (x, axes, keepdims, scale)

    wrapper, calls = _wrapped(sum_)
    assert wrapper(1, (0,)) == (1, (0,), False, 1.0)
    assert wrapper(1, axes=(1,), keepdims=True, scale=2.0) == (1, (1,), True, 2.0)
    assert calls == [1, 1]
    assert str(inspect.signature(wrapper, follow_wrapped=False)) == "(x, axes, keepdims=False, *, scale=1.0)"
    assert wrapper.__name__ == "sum_" and wrapper.__wrapped__ is sum_
    with pytest.raises(TypeError, match="positional arguments"):
        wrapper(1, (0,), False, 2.0)  # keyword-only stays keyword-only


def test_positional_only_star_args_and_star_kwargs() -> None:
    def f(a, b=2, /, *rest, key=None, **extra):
        return (a, b, rest, key, extra)

    wrapper, _ = _wrapped(f)
    assert wrapper(1) == (1, 2, (), None, {})
    assert wrapper(1, 3, 4, 5, key="k", other=6) == (1, 3, (4, 5), "k", {"other": 6})
    with pytest.raises(TypeError):
        wrapper(a=1)  # positional-only stays positional-only


def test_a_default_is_the_targets_own_object() -> None:
    marker = object()

    def f(x=marker):
        return x

    wrapper, _ = _wrapped(f)
    assert wrapper() is marker


def test_a_builtin_gets_the_generic_form_and_keeps_its_keywords() -> None:
    wrapper, calls = _wrapped(np.add)
    out = np.empty(3)
    assert wrapper(np.ones(3), 2.0, out=out) is out
    assert calls == [1]
    assert str(inspect.signature(wrapper, follow_wrapped=False)) == "(*args, **kwargs)"


def test_a_parameter_that_could_shadow_the_body_gets_the_generic_form() -> None:
    def f(_calls, x):
        return (_calls, x)

    wrapper, calls = _wrapped(f)
    assert wrapper("mine", 2) == ("mine", 2)
    assert calls == [1]  # the body still reached its own _calls


def test_env_names_must_start_with_an_underscore() -> None:
    with pytest.raises(ValueError, match="must start with '_'"):
        exact_wrapper(lambda x: x, "return {call}", {"calls": []})


def test_errors_raised_by_the_target_pass_through_the_body() -> None:
    def boom(x):
        raise ZeroDivisionError(x)

    guarded = exact_wrapper(
        boom,
        "try:\n    return {call}\nexcept ZeroDivisionError as exc:\n    raise _error(str(exc)) from exc\n",
        {"_error": RuntimeError},
    )
    with pytest.raises(RuntimeError, match="7"):
        guarded(7)
