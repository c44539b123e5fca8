"""The options of DSC's two datasets, the `scenes:` and `nyuv2:` sections of a run config, apart
from the code that renders or reads them (scenes.py, nyu.py): DSC's declaration names them, and
the launcher reads every declaration to check a request, or to list the protocols when one is
unknown, with none of that code's numpy (issue 45).
"""

from __future__ import annotations

from dfl_config.section import Count, Flag, NonNegative, Positive, Section
from protocols.dsc.portfolios import PortfolioScheme


class SceneOptions(Section):
    """The `scenes:` section: the portfolio scheme and the rendered pools. The training pool
    follows NYU-v2's 795; the test pool is smaller than its 654, since every evaluation runs all
    of it through every task of every node, and a first run should show its first evaluation
    within half a minute (protocols/configs/dsc-paper.yaml sets 650). What is drawn comes from
    the run's seed, not a key here."""

    portfolios: PortfolioScheme = "nyu"
    """How portfolios are drawn for nodes without a `tasks` attribute
    (docs/protocols/dsc.md#a8)."""
    size: Count = 32
    """Image side in pixels."""
    train_size: Count = 800
    """Training scenes, shared out by Dirichlet(`alpha`) sizes."""
    test_size: Count = 200
    """The common test pool every node is evaluated on."""
    noise: NonNegative = 0.02
    """Standard deviation of the pixel noise."""
    alpha: Positive = 1.0
    """Dirichlet concentration of the per-node training sizes (quantity skew)."""
    min_size: Count = 30
    """Training scenes every node gets at least."""
    node_priors: Flag = True
    """Each node renders with its own `ScenePrior` (false: all with the neutral one)."""


class NyuOptions(Section):
    """The `nyuv2:` section: how the 795 training images are shared out (docs/protocols/dsc.md#a8).
    The files themselves are found under the run's `data_root`."""

    alpha: Positive = 1.0
    """Dirichlet concentration of the per-node training sizes (quantity skew)."""
    min_size: Count = 30
    """Training images every node gets at least."""
