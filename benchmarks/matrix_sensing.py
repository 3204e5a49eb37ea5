"""Deep matrix sensing: dlsweep against a per-run jitted JAX loop and a per-run NumPy float64 loop,
at d = 5 and d = 10, in one run on the cores this process may use.

    taskset -c 1 python -m benchmarks.matrix_sensing [--write]    # 10,002 trajectories x 2,000 steps per d
    taskset -c 1 python -m benchmarks.matrix_sensing --quick      # 1,536 x 300, a few minutes
    python -m benchmarks.matrix_sensing --write                    # every core: a section of its own

The process has one JAX CPU device per core it may use, as the `dlsweep` command does
(`engine.use_cpu_cores`): a sweep of enough work deals each chunk over them (`Program.deals`),
while the per-run loops run on the first device, XLA threading only their large operations.

Per d, one sweep (the shape of sweeps/matrix-sensing.toml): depths 1..6 in one program x sigma0
log-spaced 1e-4..1e-1, lr 1e-3, W* = diag(12, 6, 4, 3, 0, ...), Gaussian init, population loss
1/(2N) ||W - W*||_F^2, hitting levels 0.05 / 0.5 / 0.95, float32, no early stop. Rows:

    dlsweep            the engine alone as `api.run` sets it up (`toy.engine_compute`), with and
                       without hitting levels
    per-run JAX        one `jax.jit` of a `fori_loop` of GD steps per trajectory (depth compiled in,
                       `@` products, `jax.grad`; with hits, LAPACK's SVD of W every step), f32,
                       called in a Python loop over a sample of the grid; same initial layers as dlsweep
    per-run NumPy f64  the GD equations by hand (prefix products, dl/dW_n = C_n P_{n-1}^T), SVD every
                       step; a sample, fewer steps, extrapolated per trajectory-step
    components         one vmapped step over a chunk-sized batch: the GD step and the singular values,
                       as dlsweep's model computes them and as `@` / LAPACK do, to show where time goes
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import report
from benchmarks.baselines import Measured
from benchmarks.common import DEPTHS, LEVELS, LR, SIGMA_STAR, Problem, Timing, compare_hits, machine_info, on_cores, timed

RESULTS = Path(__file__).with_name("RESULTS.md")
MODULE = "benchmarks.matrix_sensing"
TITLE = "# dlsweep benchmark: deep matrix sensing"
SIZES = (5, 10)
SIGMA0_LOG10 = (-4.0, -1.0)
RECORD_POINTS = 120
TARGET = 10.0          # dlsweep (hits) / per-run jitted JAX (hits), at every d

QUICK = {"trajectories": 1_536, "steps": 300, "jax_sample": 24, "numpy_sample": 6, "numpy_steps": 100, "component_steps": 50}
FULL = {"trajectories": 10_002, "steps": 2_000, "jax_sample": 120, "numpy_sample": 24, "numpy_steps": 300,
        "component_steps": 200}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes; explicit options still win")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="matrix sizes d, comma-separated [5,10]")
    p.add_argument("--trajectories", "-n", type=int, help=f"trajectories per d, rounded up to a multiple of {len(DEPTHS)} "
                   "[10002; quick 1536]")
    p.add_argument("--steps", type=int, help="GD steps per trajectory [2000; quick 300]")
    p.add_argument("--jax-sample", type=int, help="trajectories timed for the per-run JAX loop [120; quick 24]")
    p.add_argument("--numpy-sample", type=int, help="trajectories timed for the per-run NumPy loop [24; quick 6]")
    p.add_argument("--numpy-steps", type=int, help="steps per trajectory for the per-run NumPy loop [300; quick 100]")
    p.add_argument("--component-steps", type=int, help="steps of the component kernels [200; quick 50]")
    p.add_argument("--chunk-size", type=int, default=None, help="dlsweep chunk size [dlsweep's default]")
    p.add_argument("--write", action="store_true", help=f"also write the results into {RESULTS.name} (own section)")
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    try:
        args.sizes = tuple(int(d) for d in args.sizes.split(","))
    except ValueError:
        args.sizes = ()
    if not args.sizes or min(args.sizes) < len(SIGMA_STAR):
        p.error(f"--sizes: expected comma-separated integers >= {len(SIGMA_STAR)}, e.g. 5,10")
    for key in ("trajectories", "steps", "jax_sample", "numpy_sample", "numpy_steps", "component_steps"):
        if getattr(args, key) < 1:
            p.error(f"--{key.replace('_', '-')}: expected an integer >= 1, got {getattr(args, key)}")
    return args


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the sweep


def spec_dict(d: int, problem: Problem, levels=LEVELS) -> dict:
    """The sweep at size d: depths 1..6 x log-spaced sigma0, population loss, Gaussian init, f32;
    stop.rel_loss = 0, so every trajectory runs all steps. `levels = ()`: no hitting times."""
    return {
        "name": f"bench-matrix-sensing-d{d}",
        "model": "matrix_sensing",
        "steps": problem.steps,
        "dtype": "float32",
        "task": {"sigma_star": list(SIGMA_STAR), "d": d, "measurements": 0, "init": "gaussian"},
        "axes": {"depth": list(DEPTHS),
                 "sigma0": {"logspace": list(problem.sigma0_log10), "num": problem.n_sigma0},
                 "lr": [LR]},
        "record": {"levels": list(levels), "points": RECORD_POINTS},
        "stop": {"rel_loss": 0.0},
    }


def sweep_of(d: int, problem: Problem, levels=LEVELS):
    from dlsweep import spec

    return spec.resolve(spec_dict(d, problem, levels), MODULE)


def run_dlsweep(d: int, problem: Problem, levels, chunk_size: int | None):
    """dlsweep's chunk programs on the sweep (`toy.engine_compute`). Returns (compile, run, hits
    (n, k, levels) by run id or None, chunk size, chunks, steps run as expected)."""
    from benchmarks.toy import engine_compute

    hits, steps_run = [], []

    def keep(chunk, summary):
        hits.append(summary["hit"])
        steps_run.append(summary["steps_run"])

    compile_time, run_time, size, n_chunks = engine_compute(sweep_of(d, problem, levels), chunk_size, keep)
    complete = bool(np.all(np.concatenate(steps_run) == problem.steps))
    return compile_time, run_time, np.concatenate(hits) if levels else None, size, n_chunks, complete


def initial_layers(d: int, problem: Problem, run_ids: np.ndarray) -> np.ndarray:
    """The layers (m, max_depth, d, d) dlsweep starts `run_ids` from: the model's own init with the
    engine's per-trajectory key fold_in(key(seed), run_id)."""
    import jax

    from dlsweep import api

    sweep = sweep_of(d, problem)
    program, _, task = api.compile_inputs(sweep)
    cols = problem.columns()
    hp = {"depth": cols["depth"][run_ids].astype(np.int32), "sigma0": cols["sigma0"][run_ids].astype(np.float32),
          "lr": cols["lr"][run_ids].astype(np.float32)}
    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(sweep.seed), i))(run_ids.astype(np.int32))
    params = jax.jit(jax.vmap(lambda key, h: program.model.init(key, h, task)))(keys, hp)
    return np.asarray(params["layers"])


def w_star(d: int) -> np.ndarray:
    out = np.zeros((d, d))
    out[np.arange(len(SIGMA_STAR)), np.arange(len(SIGMA_STAR))] = SIGMA_STAR
    return out


def thresholds() -> np.ndarray:
    """levels[l] * sigma*_i, (k, levels)."""
    return np.asarray(SIGMA_STAR)[:, None] * np.asarray(LEVELS)[None, :]


def plain_product(layers, depth: int):
    """W = W_N ... W_1 by `@` (layers (>= depth, d, d))."""
    w = layers[0]
    for n in range(1, depth):
        w = layers[n] @ w
    return w


def plain_loss(product, target, depth: int):
    """layers -> 1/(2N) ||product(layers) - W*||_F^2."""
    def loss(layers):
        residual = product(layers) - target
        return (residual * residual).sum() / (2.0 * depth)

    return loss


# ----------------------------------------------------------------------------- per-run jitted JAX


def make_jax_trajectory(d: int, depth: int, steps: int, track_hits: bool):
    """A jitted (layers (depth, d, d), lr) -> (hit (k, levels), layers) running one trajectory: GD
    on 1/(2N) ||W_N ... W_1 - W*||^2 by `jax.grad`, hits from LAPACK's SVD of W before each step
    and after the last (as dlsweep checks them)."""
    import jax
    import jax.numpy as jnp

    target, levels = jnp.asarray(w_star(d), jnp.float32), jnp.asarray(thresholds(), jnp.float32)
    k = len(SIGMA_STAR)

    loss = plain_loss(lambda layers: plain_product(layers, depth), target, depth)

    def update_hits(hit, layers, t):
        sigma = jnp.linalg.svd(plain_product(layers, depth), compute_uv=False)[:k]
        return jnp.where((hit < 0) & (sigma[:, None] >= levels), t, hit)

    @jax.jit
    def trajectory(layers, lr):
        def body(t, carry):
            layers, hit = carry
            hit = update_hits(hit, layers, t) if track_hits else hit
            return layers - lr * jax.grad(loss)(layers), hit

        layers, hit = jax.lax.fori_loop(0, steps, body, (layers, jnp.full(levels.shape, -1, jnp.int32)))
        return (update_hits(hit, layers, steps) if track_hits else hit), layers

    return trajectory


def per_run_jax(d: int, problem: Problem, ids: np.ndarray, layers: np.ndarray, track_hits: bool) -> Measured:
    """One jitted trajectory per call (one compile per depth, not timed), over the sample `ids`."""
    cols = problem.columns()
    depths = cols["depth"][ids]
    fns = {int(n): make_jax_trajectory(d, int(n), problem.steps, track_hits) for n in np.unique(depths)}
    args = [(fns[int(n)], np.ascontiguousarray(layers[i, :n]), np.float32(cols["lr"][run])) for i, (run, n)
            in enumerate(zip(ids, depths))]
    compile_time = Timing()
    for n, fn in fns.items():
        first = next(a for a in args if a[0] is fn)
        with timed() as t:
            fn(*first[1:])[0].block_until_ready()
        compile_time.wall += t.wall
        compile_time.cpu += t.cpu
    hits = []
    with timed() as run_time:
        for fn, layer, lr in args:
            hits.append(np.asarray(fn(layer, lr)[0]))        # np.asarray waits for the result
    return Measured(len(ids) * problem.steps, run_time, compile=compile_time,
                    hits=np.stack(hits) if track_hits else None, run_ids=ids,
                    detail=f"{len(ids)} trajectories x {problem.steps} steps; one compile per depth")


# ----------------------------------------------------------------------------- per-run NumPy f64


def numpy_trajectory(layers: list[np.ndarray], target: np.ndarray, lr: float, steps: int) -> np.ndarray:
    """One trajectory from the equations in float64: P_n = W_n ... W_1 (P_0 = I), W = P_N,
    G = dl/dW = (W - W*) / N, C_N = G, C_{n-1} = W_n^T C_n, dl/dW_n = C_n P_{n-1}^T; hits from
    the SVD of W before each step and after the last. Returns hit (k, levels)."""
    layers = [np.array(x, np.float64) for x in layers]
    n, k = len(layers), len(SIGMA_STAR)
    levels = thresholds()
    hit = np.full(levels.shape, -1)
    for t in range(steps + 1):
        prefixes = [np.eye(len(target))]
        for layer in layers:
            prefixes.append(layer @ prefixes[-1])
        w = prefixes[-1]
        sigma = np.linalg.svd(w, compute_uv=False)[:k]
        hit[(hit < 0) & (sigma[:, None] >= levels)] = t
        if t == steps:
            return hit
        c = (w - target) / n
        grads = [None] * n
        for j in reversed(range(n)):
            grads[j] = c @ prefixes[j].T
            c = layers[j].T @ c
        layers = [layer - lr * g for layer, g in zip(layers, grads)]


def per_run_numpy(d: int, problem: Problem, ids: np.ndarray, layers: np.ndarray, steps: int) -> Measured:
    cols = problem.columns()
    target = w_star(d)
    numpy_trajectory(list(layers[0, :2]), target, LR, 3)                       # warm-up
    hits = []
    with timed() as t:
        for i, run in enumerate(ids):
            n = int(cols["depth"][run])
            hits.append(numpy_trajectory(list(layers[i, :n]), target, float(cols["lr"][run]), steps))
    return Measured(len(ids) * steps, t, hits=np.stack(hits), run_ids=ids,
                    detail=f"{len(ids)} trajectories x {steps} steps")


# ----------------------------------------------------------------------------- components


def components(d: int, problem: Problem, batch: int, steps: int) -> dict[str, float]:
    """traj-steps/s of one vmapped step over `batch` trajectories at depth 3 (mid-grid), for the GD
    step and for the singular values, as dlsweep's model computes them and as `@` / LAPACK's SVD
    do under vmap. Each kernel is a jitted fori_loop of `steps` steps, best of three (CPU time)."""
    import jax
    import jax.numpy as jnp

    from dlsweep import api

    depth = 3
    model = api.compile_inputs(sweep_of(d, problem))[0].model
    target = jnp.asarray(w_star(d), jnp.float32)
    layers = jax.random.normal(jax.random.key(0), (batch, depth, d, d), jnp.float32) * 0.3

    def gd(product):
        loss = plain_loss(product, target, depth)
        return lambda t, layers: layers - LR * jax.grad(loss)(layers)

    def peak(sigma):
        return lambda t, carry: (carry[0] * 1.0001, jnp.maximum(carry[1], sigma(carry[0])[: len(SIGMA_STAR)]))

    model_product = lambda layers: model.product({"layers": layers}, depth)  # noqa: E731
    model_sigma = lambda w: model.observe({"layers": w[None]}, {"depth": 1}, {})["sigma"]  # noqa: E731
    peak0 = jnp.zeros((batch, len(SIGMA_STAR)))
    kernels = {
        "GD step, dlsweep's product": (gd(model_product), layers),
        "GD step, `@` under vmap": (gd(lambda layers: plain_product(layers, depth)), layers),
        "singular values, dlsweep's (Jacobi)": (peak(model_sigma), (layers[:, 0], peak0)),
        "singular values, LAPACK SVD under vmap": (peak(lambda w: jnp.linalg.svd(w, compute_uv=False)), (layers[:, 0], peak0)),
    }
    rates = {}
    for name, (body, start) in kernels.items():
        fn = jax.jit(jax.vmap(lambda x, body=body: jax.lax.fori_loop(0, steps, body, x)))
        jax.block_until_ready(fn(start))
        best = min(_cpu_seconds(fn, start) for _ in range(3))
        rates[name] = batch * steps / best
    return rates


def _cpu_seconds(fn, args) -> float:
    import jax

    with timed() as t:
        jax.block_until_ready(fn(args))
    return t.cpu


# ----------------------------------------------------------------------------- main


def measure(d: int, problem: Problem, args) -> dict:
    """Every row at size d."""
    from dlsweep import api, engine

    traj_steps = problem.n * problem.steps
    log(f"d = {d}: dlsweep with hitting levels ...")
    compile_hits, run_hits, dl_hits, size, n_chunks, complete_hits = run_dlsweep(d, problem, LEVELS, args.chunk_size)
    log(f"    compile {compile_hits.wall:.1f} s, run {run_hits.wall:.1f} s ({traj_steps / run_hits.wall:.3g} traj-steps/s)")
    log(f"d = {d}: dlsweep without hitting levels ...")
    compile_plain, run_plain, _, _, _, complete_plain = run_dlsweep(d, problem, (), args.chunk_size)
    log(f"    compile {compile_plain.wall:.1f} s, run {run_plain.wall:.1f} s ({traj_steps / run_plain.wall:.3g} traj-steps/s)")
    if not (complete_hits and complete_plain):
        raise SystemExit(f"d = {d}: a dlsweep trajectory stopped before {problem.steps} steps")
    jax_ids, numpy_ids = problem.sample(args.jax_sample), problem.sample(args.numpy_sample)
    log(f"d = {d}: per-run jitted JAX, {len(jax_ids)} trajectories x {problem.steps} steps, with and without hits ...")
    layers = initial_layers(d, problem, jax_ids)
    jax_hits = per_run_jax(d, problem, jax_ids, layers, True)
    jax_plain = per_run_jax(d, problem, jax_ids, layers, False)
    log(f"    {jax_hits.timing.wall:.1f} s / {jax_plain.timing.wall:.1f} s")
    log(f"d = {d}: per-run NumPy f64, {len(numpy_ids)} trajectories x {args.numpy_steps} steps ...")
    numpy_run = per_run_numpy(d, problem, numpy_ids, initial_layers(d, problem, numpy_ids), args.numpy_steps)
    log(f"    {numpy_run.timing.wall:.1f} s")
    log(f"d = {d}: components (vmapped step, batch {size}) ...")
    parts = components(d, problem, size, args.component_steps)
    dealt = engine.chunk_devices(api.compile_inputs(sweep_of(d, problem))[0]) or 1
    return {"d": d, "size": size, "n_chunks": n_chunks, "dealt": dealt, "compile_hits": compile_hits, "run_hits": run_hits,
            "compile_plain": compile_plain, "run_plain": run_plain, "dl_hits": dl_hits, "jax_hits": jax_hits,
            "jax_plain": jax_plain, "numpy": numpy_run, "components": parts}


def dealt_over(devices: int) -> str:
    return "" if devices == 1 else f"; each dealt over {devices} CPU devices, `Program.deals`"


def rows_of(result: dict, problem: Problem) -> list[report.Row]:
    n, steps, traj_steps = problem.n, problem.steps, problem.n * problem.steps
    j, jp, npy = result["jax_hits"], result["jax_plain"], result["numpy"]
    return [
        report.Row("dlsweep engine, hits at 3 levels", f"all {n:,} x {steps:,}", traj_steps, result["run_hits"].wall,
                   result["run_hits"].cpu, result["compile_hits"].wall),
        report.Row("dlsweep engine, no hitting times (`levels = []`)", f"all {n:,} x {steps:,}", traj_steps,
                   result["run_plain"].wall, result["run_plain"].cpu, result["compile_plain"].wall),
        report.Row("per-run jitted JAX, hits (SVD every step)", f"sample {j.detail}", j.traj_steps, j.timing.wall,
                   j.timing.cpu, j.compile.wall, extrapolated=True),
        report.Row("per-run jitted JAX, no hit check", f"sample {jp.detail}", jp.traj_steps, jp.timing.wall,
                   jp.timing.cpu, jp.compile.wall, extrapolated=True),
        report.Row("per-run NumPy f64, hits (SVD every step)", f"sample {npy.detail}", npy.traj_steps,
                   npy.timing.wall, npy.timing.cpu, extrapolated=True),
    ]


def ratios(rows: list[report.Row]) -> dict[str, float]:
    hits, plain, jax_hits, jax_plain, numpy_hits = (r.rate for r in rows)
    return {"hits / per-run JAX (hits)": hits / jax_hits, "no hits / per-run JAX (no hits)": plain / jax_plain,
            "hits / per-run NumPy": hits / numpy_hits}


def render(args, info, problem, results) -> str:
    sizes = "quick" if args.quick else "full"
    summary = ["| d | dlsweep, hits | dlsweep, no hits | per-run JAX, hits | per-run JAX, no hits | per-run NumPy f64 "
               "| dlsweep ÷ per-run JAX, hits | no hits | dlsweep ÷ NumPy, hits |", "|" + "---|" * 9]
    sections, targets = [], []
    for result in results:
        rows = rows_of(result, problem)
        r = ratios(rows)
        summary.append(f"| {result['d']} | " + " | ".join(f"{row.rate:.3g}" for row in rows)
                       + f" | **{r['hits / per-run JAX (hits)']:.3g}x** | {r['no hits / per-run JAX (no hits)']:.3g}x "
                       f"| {r['hits / per-run NumPy']:,.0f}x |")
        value = r["hits / per-run JAX (hits)"]
        targets.append(f"target d = {result['d']}, hits at 3 levels: dlsweep engine / per-run jitted JAX >= "
                       f"{TARGET:g}x: measured {value:.3g}x: {'met' if value >= TARGET else 'NOT met'}")
        parts = result["components"]
        checks = [compare_hits("per-run JAX (f32, `@`, LAPACK SVD)", result["jax_hits"].hits,
                               result["dl_hits"][result["jax_hits"].run_ids]),
                  compare_hits("per-run NumPy f64", result["numpy"].hits, result["dl_hits"][result["numpy"].run_ids],
                               horizon=args.numpy_steps)]
        sections.append(f"""### d = {result['d']}

{report.table(rows, rows[0], None, problem.n * problem.steps)}

- dlsweep: {result['n_chunks']} chunks of {result['size']:,} (one depth each, compiled in{dealt_over(result['dealt'])}); compile times include
  every depth's branch and the hit replays.
- {checks[0]}.
- {checks[1]}.
- Components, one vmapped step over {result['size']:,} trajectories at depth 3 (traj-steps/s, CPU time):
  {'; '.join(f"{name} {rate:.3g}" for name, rate in parts.items())}.
""")
    return f"""{on_cores(TITLE)}

Per d, one sweep of {problem.n:,} trajectories ({len(DEPTHS)} depths {DEPTHS[0]}..{DEPTHS[-1]} in one program x
{problem.n_sigma0:,} sigma0 log-spaced 1e{problem.sigma0_log10[0]:g}..1e{problem.sigma0_log10[1]:g}) x {problem.steps:,} GD steps:
W = W_N ... W_1 (d x d), population loss 1/(2N) ||W - W*||_F^2, W* = diag{SIGMA_STAR}, Gaussian init, lr {LR:g},
hitting levels {LEVELS} (or none), {RECORD_POINTS} recorded steps, float32, `stop.rel_loss = 0` (every trajectory runs
all steps, checked). Sizes: {sizes}. Rates are trajectory-steps per second by wall time unless marked CPU; the
per-run rows are timed on a sample spread over the grid and extrapolated.

## Machine

{report.info_block(info)}

## Summary (traj-steps/s, wall)

{chr(10).join(summary)}

{chr(10).join(f"- {t}" for t in targets)}

## Results per size

{chr(10).join(sections)}
## What each row measures

- **dlsweep engine** — the sweep set up as `dlsweep.api.run` does (`api.compile_inputs`, default chunk size,
  chunks that follow the depth axis so the depth is compiled in), compiled once with `engine.compile_chunk`,
  then every chunk called and its results copied to NumPy (`benchmarks.toy.engine_compute`); no tables or files.
  With hits, the first-hitting steps of every (sigma_i, level) are exact per step (the engine observes W every
  16 steps and bounds the singular values in between by Weyl's inequality, replaying exactly a group of 16 steps where
  the bound reaches a new level); without, `levels = []`.
- **per-run jitted JAX** — one `jax.jit` of a `lax.fori_loop` of GD steps per trajectory (depth compiled in, one
  compile per depth, not timed; `@` products, `jax.grad`), called in a Python loop from the same initial layers as
  dlsweep; with hits, `jnp.linalg.svd` of W before every step and after the last.
- **per-run NumPy f64** — the same GD from the equations in float64 (no autodiff), SVD every step; fewer steps,
  extrapolated per trajectory-step; its hitting steps are compared where either side reached a level within its steps.
- **components** — kernels of one vmapped step (a jitted `fori_loop` over a chunk-sized batch, depth 3): the GD
  step with dlsweep's `MatrixSensing.product` against `@` chains under vmap, and the singular values
  (what the engine's running peak needs every 16 steps, and the replays every step) with dlsweep's `MatrixSensing.observe` against `jnp.linalg.svd` under vmap.
"""


def main(argv=None) -> int:
    from dlsweep import engine

    args = parse_args(argv)
    engine.use_cpu_cores()      # as the `dlsweep` command: one CPU device per core of this process's affinity
    info = machine_info(MODULE)
    problem = Problem(n_sigma0=-(-args.trajectories // len(DEPTHS)), steps=args.steps, sigma0_log10=SIGMA0_LOG10)
    log(f"{problem.n} trajectories x {problem.steps} steps per d, d in {args.sizes}")
    results = [measure(d, problem, args) for d in args.sizes]
    md = render(args, info, problem, results)
    print(md)
    if args.write:
        report.write_section(RESULTS, md)
        log(f"wrote the matrix-sensing section of {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
