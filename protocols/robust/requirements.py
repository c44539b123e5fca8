"""What each rule needs of a neighbourhood's size, without torch: the pure rules check it on the
vectors they are given (`aggregators`), and the launcher checks it against the smallest
in-degree of a plan's graph before any node starts (`aggregation_settings`), with the same
line, so that the two can never disagree.

n is the node and its neighbours (1 + |N_i|), k the neighbours alone.
"""

from __future__ import annotations

from protocols.robust.errors import RobustnessError


def check_trimmed_mean(b: int, n: int) -> None:
    """2b < n: at least one value of every coordinate is left."""
    if b < 0 or 2 * b >= n:
        raise RobustnessError(
            f"trimmed mean: b = {b} per side of {n} values (the node and {n - 1} neighbours); "
            f"b must be in 0..{(n - 1) // 2}, leaving at least one value")


def check_bridge(b: int, k: int) -> None:
    """2b + 1 <= k when b > 0: one neighbour value of every coordinate is kept."""
    if b < 0 or (b > 0 and 2 * b + 1 > k):
        raise RobustnessError(
            f"BRIDGE screening: b = {b} per side of {k} neighbours; screening needs at least "
            f"2b + 1 neighbours, so that one neighbour value is kept (b in "
            f"0..{max(k - 1, 0) // 2})")


def check_krum(f: int, n: int) -> None:
    """n > 2f + 2, Krum's condition (Blanchard et al. 2017)."""
    if f < 0 or 2 * f + 2 >= n:
        allowed = f"f in 0..{(n - 3) // 2}" if n >= 3 else "at least 3 vectors"
        raise RobustnessError(
            f"Krum: f = {f} Byzantine neighbours assumed among {n} vectors (the node and "
            f"{n - 1} neighbours); it needs n > 2f + 2, so {allowed}")


def check_multi_krum(f: int, m: int, n: int) -> None:
    """Krum's condition, and 1 <= m <= n members selected."""
    if not 1 <= m <= n:
        raise RobustnessError(f"Multi-Krum: m = {m} selected of {n} vectors; m must be in "
                              f"1..{n}")
    check_krum(f, n)
