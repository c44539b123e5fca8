"""Graph measures: how fast consensus contracts on a graph and where it is thin.

They are properties of a graph or of its mixing matrix, not of any protocol, so every layer
above may use them: `dfl-topology show` prints them, SSD-FL's cluster formation splits at low
conductance, and the launcher's per-cycle metrics report them.
"""

from __future__ import annotations

import numpy as np


def slem(w: np.ndarray) -> float:
    """Second-largest eigenvalue modulus: the per-step contraction of consensus error.

    For a symmetric doubly stochastic W it is max(|lambda_2|, |lambda_n|); it is 1 when the
    graph is disconnected. A 1 x 1 matrix has none, so 0.
    """
    w = np.asarray(w, dtype=np.float64)
    eig = np.linalg.eigvalsh(w) if np.array_equal(w, w.T) else np.linalg.eigvals(w)
    moduli = np.sort(np.abs(eig))[::-1]
    return float(moduli[1]) if len(moduli) > 1 else 0.0


def spectral_gap(w: np.ndarray) -> float:
    """1 - SLEM (note: SSD-FL writes 1 - lambda_2; both agree unless lambda_n < -lambda_2)."""
    return 1.0 - slem(w)


def algebraic_connectivity(adj: np.ndarray) -> float:
    """Second-smallest eigenvalue of the Laplacian D - A (Fiedler value; 0 iff disconnected)."""
    a = np.asarray(adj, dtype=np.float64)
    if len(a) < 2:
        return 0.0
    laplacian = np.diag(a.sum(axis=1)) - a
    return float(np.linalg.eigvalsh(laplacian)[1])


def exact_conductance(w: np.ndarray) -> float:
    """Conductance min_V phi(V) (SSD-FL eq. 3), by enumerating every non-empty proper subset
    (phi(V) = phi(V^c), so all of them)."""
    n = len(w)
    masks = ((np.arange(1, 2**n - 1)[:, None] >> np.arange(n)) & 1).astype(np.float64)
    return float(cut_ratios(w, masks).min())


def sweep_conductance(w: np.ndarray) -> float:
    """The best prefix cut of the Fiedler order: an upper bound on eq. 3."""
    order = fiedler_order(w)
    masks = np.tril(np.ones((len(w) - 1, len(w))))[:, np.argsort(order, kind="stable")]
    return float(cut_ratios(w, masks).min())


def cut_ratios(w: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """phi(V) = cut(V, V^c) / min(vol V, vol V^c) per row of 0/1 `masks` (0 where vol is 0)."""
    d = w.sum(axis=1)
    vol = masks @ d
    cut = ((masks @ w) * (1.0 - masks)).sum(axis=1)
    denom = np.minimum(vol, d.sum() - vol)
    return np.where(denom > 0, cut / np.where(denom > 0, denom, 1.0), 0.0)


def fiedler_order(w: np.ndarray) -> np.ndarray:
    """Member positions sorted by the Fiedler vector of the normalised Laplacian of `w`."""
    d = w.sum(axis=1)
    inv_sqrt = np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)), 0.0)
    laplacian = np.eye(len(w)) - inv_sqrt[:, None] * w * inv_sqrt[None, :]
    _, vectors = np.linalg.eigh(laplacian)
    v = inv_sqrt * vectors[:, 1]
    if v[np.argmax(np.abs(v))] < 0:
        v = -v
    return np.argsort(v, kind="stable")
