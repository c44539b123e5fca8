"""The `synthetic:` section: the shape and difficulty of the generated Gaussian-blob dataset
(dfl_node/learning/synthetic.py). Its seed is the run's data seed, not a key of its own."""

from __future__ import annotations

from dfl_config.section import Count, NonNegative, Section


class SyntheticSettings(Section):
    classes: Count = 10
    """Number of classes (one Gaussian blob each)."""
    features: Count = 32
    """Dimension of a sample."""
    train_size: Count = 4000
    """Training samples, shared out by the partition."""
    test_size: Count = 2000
    """Test samples, the pool of the evaluation split."""
    noise: NonNegative = 2.0
    """Standard deviation of the noise around a class mean (means are ~ N(0, 1))."""
