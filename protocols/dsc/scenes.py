"""SynthScenes: procedural multi-task scenes (docs/protocols/dsc.md#mini-run), numpy only, seeded.

NYU-v2 and Taskonomy cannot be downloaded here, so each sample is rendered from a tiny 3-D scene
under an orthographic camera: a tilted background plane and 1..`max_objects` primitives (sphere,
box, pyramid, cone) composited by z-buffer. From that one scene come all five tasks:
- `dep`: the z-buffer depth;
- `seg`: the primitive class per pixel (0 background, 1 sphere, 2 box, 3 pyramid, 4 cone);
- `sn`: normals *derived from depth*, normalise(-dz/dx, -dz/dy, 1), so Sn and Dep are
  geometrically coupled while Seg is semantic (the paper's Fig. 4 affinity structure);
- `edge`: Sobel magnitude of the depth map, normalised per image to [0, 1];
- `kp`: a Gaussian heat-map at the centre of every visible object.
The RGB image is a jittered class albedo times Lambertian shading from a random light, plus
Gaussian noise, so colour alone does not solve Seg.

Non-IID clients (docs/protocols/dsc.md#a8): each node renders its own training scenes from its own
`ScenePrior` (light-direction cone, object count, class mix) and gets a Dirichlet share of the
training pool size; every node is evaluated on one common test pool. All draws
come from (seed, node, name) streams, so the data is the same in every process and on every host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from protocols.dsc.dataset_options import SceneOptions
from protocols.dsc.taskdata import TaskSet, dirichlet_sizes
from protocols.sdk import numpy_stream

CLASSES = ("background", "sphere", "box", "pyramid", "cone")
# Base albedo per class (RGB); each object mixes it with a random colour (hue jitter).
BASE_ALBEDO = np.array([[0.6, 0.6, 0.6], [0.9, 0.2, 0.2], [0.2, 0.8, 0.2],
                        [0.2, 0.3, 0.9], [0.9, 0.8, 0.1]])
ALBEDO_JITTER = 0.45
KP_SIGMA = 0.04  # heat-map width, in image widths


@dataclass(frozen=True)
class ScenePrior:
    """What a client's scenes look like: the light comes from within `light_spread` radians of
    `light_azimuth`; scenes hold 1..`max_objects` objects of classes drawn by `class_weights`."""

    light_azimuth: float = 0.0
    light_spread: float = math.pi
    max_objects: int = 4
    class_weights: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)


def draw_prior(seed: int, node: int) -> ScenePrior:
    """A node's own scene statistics, from its `scenes/prior` stream."""
    rng = numpy_stream(seed, node, "scenes/prior")
    weights = rng.dirichlet(np.full(4, 2.0))
    return ScenePrior(light_azimuth=float(rng.uniform(-math.pi, math.pi)),
                      light_spread=float(rng.uniform(0.3, 1.2)),
                      max_objects=int(rng.integers(2, 5)),
                      class_weights=(float(weights[0]), float(weights[1]), float(weights[2]),
                                     float(weights[3])))


def eval_pool(opts: SceneOptions, seed: int) -> TaskSet:
    """The common test pool, rendered with the neutral prior."""
    rng = numpy_stream(seed, -1, "scenes/test")
    return render_many(rng, opts.test_size, opts.size, ScenePrior(), opts.noise)


def train_sizes(opts: SceneOptions, seed: int, nodes: int) -> np.ndarray:
    """Every node's count of training scenes (ValueError when `min_size` cannot be met)."""
    return dirichlet_sizes(opts.train_size, nodes, opts.alpha, opts.min_size, seed)


def node_train(opts: SceneOptions, seed: int, node_ids: list[int], node: int) -> TaskSet:
    """Node `node`'s training scenes: its Dirichlet share, rendered with its own prior."""
    count = int(train_sizes(opts, seed, len(node_ids))[node_ids.index(node)])
    prior = draw_prior(seed, node) if opts.node_priors else ScenePrior()
    rng = numpy_stream(seed, node, "scenes/train")
    return render_many(rng, count, opts.size, prior, opts.noise)


def render_many(rng: np.random.Generator, count: int, size: int, prior: ScenePrior,
                noise: float) -> TaskSet:
    scenes = [render(rng, size, prior, noise) for _ in range(count)]
    images = np.stack([s.pop("image") for s in scenes])
    targets = {task: np.stack([s[task] for s in scenes]) for task in scenes[0]}
    return TaskSet(images, targets, seg_classes=len(CLASSES))


def render(rng: np.random.Generator, size: int, prior: ScenePrior,
           noise: float) -> dict[str, np.ndarray]:
    """One scene: image (3,H,W), seg (H,W), dep/kp/edge (1,H,W), sn (3,H,W)."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float64)
    x, y = (x + 0.5) / size, (y + 0.5) / size
    z0, (a, b) = rng.uniform(2.0, 2.5), rng.uniform(-0.5, 0.5, 2)
    depth = z0 + a * (x - 0.5) + b * (y - 0.5)  # the tilted background plane
    seg = np.zeros((size, size), dtype=np.int64)
    owner = np.full((size, size), -1)
    albedo = np.broadcast_to(jittered_albedo(rng, 0), (size, size, 3)).copy()
    centres = []
    weights = np.asarray(prior.class_weights) / sum(prior.class_weights)
    for obj in range(int(rng.integers(1, prior.max_objects + 1))):
        cls = int(rng.choice(4, p=weights)) + 1
        cx, cy = rng.uniform(0.15, 0.85, 2)
        inside, z = primitive(rng, cls, x - cx, y - cy)
        front = inside & (z < depth)
        depth[front], seg[front], owner[front] = z[front], cls, obj
        albedo[front] = jittered_albedo(rng, cls)
        centres.append((obj, cx, cy))
    normals = normals_from_depth(depth)
    image = albedo.transpose(2, 0, 1) * shading(rng, normals, prior)
    image += rng.normal(0.0, noise, image.shape)
    visible = [(cx, cy) for obj, cx, cy in centres
               if owner[min(int(cy * size), size - 1), min(int(cx * size), size - 1)] == obj]
    return {"image": image.astype(np.float32), "seg": seg,
            "sn": normals.astype(np.float32), "dep": depth[None].astype(np.float32),
            "kp": keypoint_map(x, y, visible)[None].astype(np.float32),
            "edge": sobel_edges(depth)[None].astype(np.float32)}


def primitive(rng: np.random.Generator, cls: int, dx: np.ndarray,
              dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask, depth) of one primitive centred at the origin of (dx, dy); nearest depth `top`."""
    radius, top = rng.uniform(0.08, 0.22), rng.uniform(0.8, 1.7)
    q = np.hypot(dx, dy)
    if cls == 1:  # sphere: z = zc - sqrt(r^2 - q^2) with zc = top + r
        return q < radius, top + radius - np.sqrt(np.clip(radius**2 - q**2, 0.0, None))
    if cls == 2:  # box: a rectangle with a tilted planar top
        hx, hy = radius * rng.uniform(0.6, 1.0, 2)
        tilt = rng.uniform(-0.6, 0.6, 2)
        return (np.abs(dx) < hx) & (np.abs(dy) < hy), top + 0.3 + tilt[0] * dx + tilt[1] * dy
    slope = rng.uniform(1.0, 2.0)
    if cls == 3:  # pyramid: square base, apex towards the camera
        r = np.maximum(np.abs(dx), np.abs(dy))
        return r < radius, top + slope * r
    return q < radius, top + slope * q  # cone


def jittered_albedo(rng: np.random.Generator, cls: int) -> np.ndarray:
    return (1 - ALBEDO_JITTER) * BASE_ALBEDO[cls] + ALBEDO_JITTER * rng.uniform(0, 1, 3)


def normals_from_depth(depth: np.ndarray) -> np.ndarray:
    """Unit normals (3,H,W) = normalise(-dz/dx, -dz/dy, 1), derivatives in image-width units."""
    size = depth.shape[0]
    dz_dy, dz_dx = np.gradient(depth, 1.0 / size)
    n = np.stack([-dz_dx, -dz_dy, np.ones_like(depth)])
    return n / np.linalg.norm(n, axis=0, keepdims=True)


def shading(rng: np.random.Generator, normals: np.ndarray, prior: ScenePrior) -> np.ndarray:
    """Ambient 0.25 plus Lambertian max(0, n.l) for a light in the prior's azimuth cone."""
    azimuth = prior.light_azimuth + rng.uniform(-prior.light_spread, prior.light_spread)
    elevation = rng.uniform(0.3, 1.0)
    light = np.array([math.cos(azimuth) * math.sin(elevation),
                      math.sin(azimuth) * math.sin(elevation), math.cos(elevation)])
    return 0.25 + 0.75 * np.clip(np.tensordot(light, normals, axes=1), 0.0, None)


def keypoint_map(x: np.ndarray, y: np.ndarray, centres: list[tuple[float, float]]) -> np.ndarray:
    heat = np.zeros_like(x)
    for cx, cy in centres:
        heat = np.maximum(heat, np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * KP_SIGMA**2)))
    return heat


def sobel_edges(depth: np.ndarray) -> np.ndarray:
    """Sobel gradient magnitude of the depth map, scaled so the strongest edge is 1."""
    p = np.pad(depth, 1, mode="edge")
    gx = (p[:-2, 2:] + 2 * p[1:-1, 2:] + p[2:, 2:]) - (p[:-2, :-2] + 2 * p[1:-1, :-2] + p[2:, :-2])
    gy = (p[2:, :-2] + 2 * p[2:, 1:-1] + p[2:, 2:]) - (p[:-2, :-2] + 2 * p[:-2, 1:-1] + p[:-2, 2:])
    mag = np.hypot(gx, gy)
    peak = mag.max()
    return mag / peak if peak > 0 else mag


def node_scenes(opts: SceneOptions, seed: int, node_ids: list[int], node: int,
                tasks: tuple[str, ...]) -> tuple[TaskSet, TaskSet]:
    """(train, test) for one node, carrying only the labels of its portfolio `tasks`."""
    everything = np.arange(opts.test_size)
    train = node_train(opts, seed, node_ids, node)
    test = eval_pool(opts, seed)
    return train.select(np.arange(len(train)), tasks), test.select(everything, tasks)
