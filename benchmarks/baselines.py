"""The ways the toy sweep is run without dlsweep, and the machine's ceiling for its arithmetic.

Every baseline computes what dlsweep computes per trajectory-step (GD step of eq. 9 plus the
first-hitting steps for 3 levels, hits checked before each step and after the last one, as in
`dlsweep.engine`), except the ceiling, which drops the hit tracking on purpose.

    per_run_numpy      one trajectory at a time, Python loop over steps, NumPy f64 arrays of size k
    per_run_jax        one jitted `fori_loop` per trajectory (depth traced, so compiled once),
                       called from a Python loop; f32
    batched_numpy      a batch of trajectories vectorized, f32, state (k, B_depth) per depth group
                       (static integer powers by repeated multiply), hit check every step
    ceiling            fused elementwise JAX kernel, state (k, B) with the batch on the minor axis,
                       depth fixed at compile time (one kernel per depth, B each), no hit tracking
"""

from __future__ import annotations

import dataclasses

import numpy as np

from benchmarks.common import LEVELS, SIGMA_STAR, Problem, Timing, timed


@dataclasses.dataclass
class Measured:
    traj_steps: int
    timing: Timing
    compile: Timing | None = None
    hits: np.ndarray | None = None        # (m, k, levels) for cross-checks, when all steps were run
    run_ids: np.ndarray | None = None
    detail: str = ""


# ----------------------------------------------------------------------------- per-run NumPy f64


def numpy_trajectory(sigma0: float, depth: int, lr: float, steps: int) -> np.ndarray:
    """One trajectory the papers' way. Returns hit (k, levels): first step with
    sigma_i >= level * sigma*_i, -1 if never within `steps`."""
    s_star = np.asarray(SIGMA_STAR)
    thresholds = s_star[:, None] * np.asarray(LEVELS)[None, :]
    w = np.full(len(s_star), sigma0 ** (1.0 / depth))
    hit = np.full(thresholds.shape, -1)
    step_size = lr / depth
    for t in range(steps):
        sigma = w ** depth
        new = (hit < 0) & (sigma[:, None] >= thresholds)
        hit[new] = t
        w = w + step_size * w ** (depth - 1) * (s_star - sigma)
    sigma = w ** depth
    hit[(hit < 0) & (sigma[:, None] >= thresholds)] = steps
    return hit


def per_run_numpy(problem: Problem, sample: int, steps: int) -> Measured:
    cols = problem.columns()
    ids = problem.sample(sample)
    numpy_trajectory(1e-3, 2, 1e-3, 10)                       # warm-up (imports, caches)
    hits = []
    with timed() as t:
        for i in ids:
            hits.append(numpy_trajectory(float(cols["sigma0"][i]), int(cols["depth"][i]), float(cols["lr"][i]), steps))
    return Measured(len(ids) * steps, t, hits=np.stack(hits) if steps == problem.steps else None, run_ids=ids,
                    detail=f"{len(ids)} trajectories x {steps} steps")


# ----------------------------------------------------------------------------- per-run jitted JAX


def _masked_power(jnp, w, n, max_n: int):
    """w**n for a traced integer 0 <= n <= max_n by masked repeated multiply (exact)."""
    p = jnp.ones_like(w)
    for i in range(max_n):
        p = jnp.where(i < n, p * w, p)
    return p


def make_jax_trajectory(steps: int, max_depth: int):
    """A jitted function (sigma0, depth, lr) -> hit (k, levels) running one trajectory; depth is
    a traced int32, so every depth shares one compiled program."""
    import jax
    import jax.numpy as jnp

    s_star = jnp.asarray(SIGMA_STAR, jnp.float32)
    thresholds = s_star[:, None] * jnp.asarray(LEVELS, jnp.float32)[None, :]

    def update_hits(hit, sigma, t):
        return jnp.where((hit < 0) & (sigma[:, None] >= thresholds), t, hit)

    @jax.jit
    def trajectory(sigma0, depth, lr):
        w0 = jnp.full(s_star.shape, sigma0 ** (1.0 / depth.astype(jnp.float32)))
        hit0 = jnp.full(thresholds.shape, -1, jnp.int32)
        step_size = lr / depth.astype(jnp.float32)

        def body(t, carry):
            w, hit = carry
            below = _masked_power(jnp, w, depth - 1, max_depth - 1)     # w^(N-1)
            sigma = below * w
            hit = update_hits(hit, sigma, t)
            return w + step_size * below * (s_star - sigma), hit

        w, hit = jax.lax.fori_loop(0, steps, body, (w0, hit0))
        return update_hits(hit, _masked_power(jnp, w, depth, max_depth), steps)

    return trajectory


def per_run_jax(problem: Problem, sample: int, steps: int) -> Measured:
    cols = problem.columns()
    ids = problem.sample(sample)
    fn = make_jax_trajectory(steps, int(cols["depth"].max()))
    args = [(np.float32(cols["sigma0"][i]), np.int32(cols["depth"][i]), np.float32(cols["lr"][i])) for i in ids]
    with timed() as compile_t:
        np.asarray(fn(*args[0]))                                  # compile + first call, not counted
    hits = []
    with timed() as t:
        for a in args:
            hits.append(np.asarray(fn(*a)))                       # np.asarray waits for the result
    return Measured(len(ids) * steps, t, compile=compile_t,
                    hits=np.stack(hits) if steps == problem.steps else None, run_ids=ids,
                    detail=f"{len(ids)} trajectories x {steps} steps; compile once")


# ----------------------------------------------------------------------------- batched NumPy f32


def numpy_batch(sigma0: np.ndarray, depth: np.ndarray, lr: np.ndarray, steps: int) -> np.ndarray:
    """A batch of trajectories vectorized in NumPy f32, grouped by depth (static integer powers by
    repeated in-place multiply), state (k, B_group) so per-trajectory scalars broadcast along rows.
    Returns hit (B, k, levels) in the input order."""
    f32 = np.float32
    s_star = np.asarray(SIGMA_STAR, f32)[:, None]                                   # (k, 1)
    thresholds = [(s_star * f32(level)) for level in LEVELS]                        # each (k, 1)
    k, n_levels = len(SIGMA_STAR), len(LEVELS)
    hit_out = np.empty((len(depth), k, n_levels), np.int32)
    for n in np.unique(depth):
        n = int(n)
        idx = np.nonzero(depth == n)[0]
        b = len(idx)
        w = np.repeat((sigma0[idx] ** (1.0 / n)).astype(f32)[None, :], k, axis=0)   # (k, b)
        step_size = (lr[idx] / n).astype(f32)[None, :]                              # (1, b)
        hit = np.full((n_levels, k, b), -1, np.int32)
        below, sigma, tmp = (np.empty((k, b), f32) for _ in range(3))
        reached, fresh = np.empty((k, b), bool), np.empty((k, b), bool)

        def check(t):
            for level in range(n_levels):
                np.greater_equal(sigma, thresholds[level], out=reached)
                np.less(hit[level], 0, out=fresh)
                np.logical_and(reached, fresh, out=fresh)
                np.putmask(hit[level], fresh, t)

        for t in range(steps):
            below.fill(1.0)
            for _ in range(n - 1):
                np.multiply(below, w, out=below)          # w^(N-1)
            np.multiply(below, w, out=sigma)              # w^N
            check(t)
            np.subtract(s_star, sigma, out=tmp)
            np.multiply(tmp, below, out=tmp)
            np.multiply(tmp, step_size, out=tmp)
            np.add(w, tmp, out=w)
        np.copyto(sigma, w)
        for _ in range(n - 1):
            np.multiply(sigma, w, out=sigma)
        check(steps)
        hit_out[idx] = hit.transpose(2, 1, 0)
    return hit_out


def batched_numpy(problem: Problem, batch: int, steps: int) -> Measured:
    cols = problem.columns()
    ids = problem.sample(batch)
    numpy_batch(cols["sigma0"][ids[:12]], cols["depth"][ids[:12]], cols["lr"][ids[:12]], 5)   # warm-up
    with timed() as t:
        hits = numpy_batch(cols["sigma0"][ids], cols["depth"][ids], cols["lr"][ids], steps)
    return Measured(len(ids) * steps, t, hits=hits if steps == problem.steps else None, run_ids=ids,
                    detail=f"batch of {len(ids)} (depths mixed, grouped) x {steps} steps")


# ----------------------------------------------------------------------------- ceiling


def flops_per_element(depth: int) -> int:
    """Nominal arithmetic of the fixed-depth update per value: w^(N-1) (N-2 multiplies),
    sigma = w^(N-1) w, s* - sigma, * w^(N-1), * lr/N, + w; at N = 1 sigma = w and the
    multiply by w^0 is gone, so 3."""
    return 3 if depth == 1 else depth + 3


def make_ceiling_kernel(depth: int, steps: int, unroll: int):
    """steps fixed-depth GD updates on (k, B) in one jitted fori_loop, no hit tracking."""
    import jax
    import jax.numpy as jnp

    s_star = jnp.asarray(SIGMA_STAR, jnp.float32)[:, None]

    @jax.jit
    def kernel(w, step_size):
        def body(_, w):
            below = w ** (depth - 1) if depth > 1 else jnp.ones_like(w)     # static exponent: multiplies
            sigma = below * w
            return w + step_size * below * (s_star - sigma)

        return jax.lax.fori_loop(0, steps, body, w, unroll=unroll)

    return kernel


def ceiling(problem: Problem, batch: int, steps: int, repeats: int, unrolls: tuple[int, ...]) -> Measured:
    """One kernel per depth of the sweep, `batch` trajectories each; for each depth the best time
    over `repeats` runs of each `fori_loop` unroll factor. The throughput for the depth mix is the
    total traj-steps over the summed best times."""
    import jax.numpy as jnp

    from benchmarks.common import DEPTHS, LR

    compile_t = Timing()
    best, best_unroll = {}, {}
    sigma0 = np.logspace(-6, -1, batch)
    step_flops = 0.0
    for depth in DEPTHS:
        w = jnp.asarray(np.repeat((sigma0 ** (1.0 / depth))[None, :], len(SIGMA_STAR), axis=0), jnp.float32)
        step_size = jnp.full((1, batch), LR / depth, jnp.float32)
        for unroll in unrolls:
            kernel = make_ceiling_kernel(depth, steps, unroll)
            with timed() as c:
                kernel(w, step_size).block_until_ready()
            compile_t.wall += c.wall
            compile_t.cpu += c.cpu
            for _ in range(repeats):
                with timed() as t:
                    out = kernel(w, step_size).block_until_ready()
                if depth not in best or t.wall < best[depth].wall:
                    best[depth], best_unroll[depth] = t, unroll
            if not np.isfinite(np.asarray(out)).all():
                raise RuntimeError(f"ceiling kernel at depth {depth} produced non-finite values")
        step_flops += flops_per_element(depth) * len(SIGMA_STAR)
    total = Timing(sum(t.wall for t in best.values()), sum(t.cpu for t in best.values()))
    per_depth = ", ".join(f"N={d}: {batch * steps / t.wall:.2e} (unroll {best_unroll[d]})" for d, t in best.items())
    flops = step_flops / len(DEPTHS)
    gflops = flops * batch * steps * len(DEPTHS) / total.wall / 1e9
    return Measured(batch * steps * len(DEPTHS), total, compile=compile_t,
                    detail=(f"(k, B) = (4, {batch}) per depth x {steps} steps, best of {repeats} repeats x unroll "
                            f"{'/'.join(map(str, unrolls))}; ~{flops:.1f} flops per traj-step (depth mix, nominal "
                            f"ops, a multiply-add counted as 2) -> {gflops:.0f} GFLOP/s; per depth traj-steps/s: {per_depth}"))
