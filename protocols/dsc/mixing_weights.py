"""DSC's mixing weights and their diagnostics (paper Eq. 7, 8, 17-20; docs/protocols/dsc.md).

Everything here is plain numpy on small vectors, shared by the protocol (one node computes its
own column or row), by the `jstar` command and by the tests (whole matrices):

- task affinity s(u, u') = u.u' / (|u| |u'|) of two binary routing policies (Eq. 7), 0 when a
  policy skips every block;
- client affinity S_{i,n} (Eq. 8): the symmetric best matching of the two portfolios, and the
  heuristic-max variant S^max_{i,n} = max over task pairs (§6); S_{n,n} = 1 for both;
- Eq. 18: w_{i,n} = exp(S_{i,n}/tau) / sum_{m in N_n + n} exp(S_{m,n}/tau), a softmax over the
  *sender's* column, so W is column-stochastic (1^T W = 1^T) and preserves the network mean of
  psi exactly while its rows do not sum to 1 (docs/protocols/dsc.md#a1). The same softmax over
  a receiver's row is the `row_softmax` ablation;
- the decentralized FedAvg variants (§6): column-uniform 1/(d_n+1) (= Eq. 18 with constant S),
  row-uniform 1/(d_i+1) and Metropolis 1/(1+max(d_i,d_n));
- HeurFedAMP's receiver-normalised attention over model cosines (§6);
- rho(W), the largest eigenvalue modulus other than the Perron root 1, and the Perron vector v.

Weights are dicts keyed by node id in ascending order, the order every neighbour sum runs in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal, get_args

import numpy as np

from protocols.dsc.hyper import FedAvgVariant

Policies = Mapping[str, np.ndarray]  # task -> binary policy u_{i,t} (K floats)
Weights = dict[int, float]  # node id -> weight, ascending ids

Affinity = Literal["similarity", "max"]
AFFINITIES: tuple[str, ...] = get_args(Affinity)
FEDAVG_VARIANTS: tuple[str, ...] = get_args(FedAvgVariant)


def task_affinity(u: np.ndarray, v: np.ndarray) -> float:
    """Eq. 7 in float64; 0 for a policy that skips every block (docs/protocols/dsc.md#a5)."""
    u, v = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if nu == 0.0 or nv == 0.0:
        return 0.0
    return float(np.dot(u, v)) / (nu * nv)


def pair_table(mine: Policies, theirs: Policies) -> np.ndarray:
    """s(u_{i,t}, u_{n,t'}) for t in T_i (rows) and t' in T_n (columns), in sorted task order."""
    return np.array([[task_affinity(mine[t], theirs[t2]) for t2 in sorted(theirs)]
                     for t in sorted(mine)])


def client_affinity(mine: Policies, theirs: Policies) -> float:
    """Eq. 8: half the mean best match of my tasks in theirs, plus half the converse."""
    table = pair_table(mine, theirs)
    return 0.5 * float(table.max(axis=1).mean()) + 0.5 * float(table.max(axis=0).mean())


def max_affinity(mine: Policies, theirs: Policies) -> float:
    """The heuristic-max baseline: one well-matched task pair gives full affinity (§6)."""
    return float(pair_table(mine, theirs).max())


def affinity(kind: Affinity, mine: Policies, theirs: Policies) -> float:
    if kind == "similarity":
        return client_affinity(mine, theirs)
    if kind == "max":
        return max_affinity(mine, theirs)
    raise ValueError(f"affinity must be one of {list(AFFINITIES)}, got {kind!r}")


def softmax_weights(scores: Mapping[int, float], tau: float) -> Weights:
    """exp(S/tau) normalised over `scores`: one column of Eq. 18 (sender n's scores S_{m,n}),
    or one row of the row_softmax ablation. Shifted by the maximum, so small tau is safe."""
    top = max(scores.values())
    e = {m: math.exp((s - top) / tau) for m, s in sorted(scores.items())}
    z = math.fsum(e.values())
    return {m: v / z for m, v in e.items()}


def fedavg_weight(variant: FedAvgVariant, receiver_degree: int, sender_degree: int) -> float:
    """w_{i,n} of decentralized FedAvg for d_i = receiver_degree, d_n = sender_degree (§6)."""
    if variant == "column_uniform":
        return 1.0 / (sender_degree + 1)
    if variant == "row_uniform":
        return 1.0 / (receiver_degree + 1)
    if variant == "metropolis":
        return 1.0 / (1 + max(receiver_degree, sender_degree))
    raise ValueError(f"fedavg variant must be one of {list(FEDAVG_VARIANTS)}, got {variant!r}")


def fedavg_row(variant: FedAvgVariant, node: int, neighbors: Mapping[int, int],
               degree: int) -> Weights:
    """Row i of FedAvg's W: `neighbors` maps each n in N_i to d_n. Metropolis puts the rest of
    the row on the diagonal (doubly stochastic); the uniform variants are uniform on N_i + i
    seen from the normalising side."""
    row = {n: fedavg_weight(variant, degree, d_n) for n, d_n in neighbors.items()}
    if variant == "metropolis":
        row[node] = 1.0 - math.fsum(row.values())
    else:
        row[node] = fedavg_weight(variant, degree, degree)
    return dict(sorted(row.items()))


def fedamp_row(node: int, cosines: Mapping[int, float], xi_self: float,
               sigma: float) -> Weights:
    """HeurFedAMP on one hop (§6): xi_{i,n} = (1 - xi_self) softmax_n(sigma c_{i,n}) over N_i,
    xi_{i,i} = xi_self; row-stochastic (receiver-normalised)."""
    soft = softmax_weights({n: c for n, c in cosines.items()}, 1.0 / sigma)
    row = {n: (1.0 - xi_self) * w for n, w in soft.items()}
    row[node] = xi_self
    return dict(sorted(row.items()))


def model_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos(a, b) of two flat float32 models, correctly rounded: the float64 products of float32
    values are exact and math.fsum sums them exactly, so no BLAS kernel, thread count or buffer
    alignment can change the result (the transports must agree bit for bit)."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    dot = math.fsum((x * y).tolist())
    na, nb = math.sqrt(math.fsum((x * x).tolist())), math.sqrt(math.fsum((y * y).tolist()))
    return dot / (na * nb) if na > 0 and nb > 0 else 0.0


# Whole matrices (the jstar command, summaries and tests).


def adjacency(n: int, edges: Sequence[tuple[int, int]]) -> np.ndarray:
    a = np.zeros((n, n), dtype=bool)
    for u, v in edges:
        a[u, v] = a[v, u] = True
    return a


def affinity_matrix(policies: Sequence[Policies], adj: np.ndarray,
                    kind: Affinity = "similarity") -> np.ndarray:
    """S on the graph's edges and the diagonal (1); 0 elsewhere, where it is never used."""
    n = len(policies)
    s = np.eye(n)
    for i in range(n):
        for m in range(n):
            if adj[i, m]:
                s[i, m] = affinity(kind, policies[i], policies[m])
    return s


def eq18_matrix(s: np.ndarray, adj: np.ndarray, tau: float) -> np.ndarray:
    """W of Eq. 18: column n is the softmax of S_{m,n}/tau over m in N_n + n."""
    n = len(s)
    w = np.zeros((n, n))
    for col in range(n):
        support = [m for m in range(n) if adj[m, col] or m == col]
        for m, value in softmax_weights({m: s[m, col] for m in support}, tau).items():
            w[m, col] = value
    return w


def subdominant_modulus(w: np.ndarray) -> float:
    """rho(W): the largest |lambda| once the Perron root (the eigenvalue closest to 1) is set
    aside; < 1 for a connected graph with a positive diagonal."""
    eig = np.linalg.eigvals(w)
    rest = np.delete(eig, int(np.argmin(np.abs(eig - 1.0))))
    return float(np.abs(rest).max()) if len(rest) else 0.0


def perron_vector(w: np.ndarray) -> np.ndarray:
    """v with W v = v, v > 0, 1^T v = 1: W^J -> v 1^T, the weighted state psi_i -> N v_i psi_bar."""
    eig, vec = np.linalg.eig(w)
    v = np.real(vec[:, int(np.argmin(np.abs(eig - 1.0)))])
    return v / v.sum()


def mix(w: np.ndarray, psi: np.ndarray, steps: int) -> np.ndarray:
    """Eq. 17 applied `steps` times, one synchronous (Jacobi) step at a time: Psi <- W Psi."""
    for _ in range(steps):
        psi = w @ psi
    return psi
