"""ampcore.distributions.Categorical: torch's sampling, log-probabilities (with gradients) and entropy."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore.distributions import Categorical


def test_probs_and_logits_give_the_same_normalised_distribution():
    raw = np.array([[1.0, 6.0, 3.0], [5.0, 5.0, 0.0]])
    by_probs = Categorical(probs=ampcore.tensor(raw, dtype=ampcore.float64))
    by_logits = Categorical(logits=ampcore.tensor(np.log(raw[:1]), dtype=ampcore.float64))
    np.testing.assert_allclose(by_probs.probs.numpy(), raw / raw.sum(-1, keepdims=True), rtol=1e-15)
    np.testing.assert_allclose(by_logits.probs.numpy(), raw[:1] / raw[:1].sum(), rtol=1e-15)
    assert by_probs.batch_shape == (2,) and by_probs.event_shape == () and by_probs.mode.tolist() == [1, 0]


def test_log_prob_picks_each_value_and_its_gradient_is_finite_at_zero_probability():
    p = ampcore.tensor([[0.1, 0.6, 0.3], [0.5, 0.5, 0.0]], dtype=ampcore.float64, requires_grad=True)
    m = Categorical(p)
    lp = m.log_prob(ampcore.tensor([1, 0]))
    np.testing.assert_allclose(lp.detach().numpy(), np.log([0.6, 0.5]), rtol=1e-12)
    lp.sum().backward()
    # d/dp_j log(p_k / sum p) = [j == k] / p_k - 1 / sum p
    np.testing.assert_allclose(p.grad.numpy(), [[-1, 1 / 0.6 - 1, -1], [1, -1, -1]], rtol=1e-9)
    assert m.log_prob(ampcore.tensor([[1, 0], [2, 1]])).shape == (2, 2)  # sample_shape + batch_shape


def test_entropy_counts_zero_probabilities_as_zero():
    m = Categorical(ampcore.tensor([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]], dtype=ampcore.float64))
    np.testing.assert_allclose(m.entropy().numpy(), [-(2 * 0.25 * np.log(0.25) + 0.5 * np.log(0.5)), 0.0], atol=1e-12)


def test_samples_follow_the_probabilities_and_are_seeded():
    probs = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    ampcore.manual_seed(0)
    draws = Categorical(logits=ampcore.tensor([0.0, 1.0, 2.0])).sample((20000,))
    assert draws.dtype is ampcore.int64 and draws.shape == (20000,)
    freq = np.bincount(draws.numpy(), minlength=3) / 20000
    assert np.all(np.abs(freq - probs) < 6 * np.sqrt(probs * (1 - probs) / 20000))  # 6 binomial sd
    ampcore.manual_seed(0)
    assert np.array_equal(Categorical(logits=ampcore.tensor([0.0, 1.0, 2.0])).sample((20000,)).numpy(), draws.numpy())
    assert (
        Categorical(ampcore.ones(4, 3)).sample((2, 5)).shape == (2, 5, 4)
        and Categorical(ampcore.ones(3)).sample().shape == ()
    )


def test_exactly_one_parameter_is_needed():
    with pytest.raises(ValueError, match="exactly one of probs or logits"):
        Categorical(probs=ampcore.ones(2), logits=ampcore.ones(2))
    with pytest.raises(ValueError, match="exactly one of probs or logits"):
        Categorical()
