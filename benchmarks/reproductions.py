"""Full-size reproductions of Gissin et al.'s diagonal-network figures as one dlsweep sweep each,
against the per-run loops they replace, estimated from the steps each run of the sweep needed.

    python -m benchmarks.reproductions gissin-fig6 [--set KEY=VALUE ...] [--write]
    python -m benchmarks.reproductions gissin-fig3 [--set KEY=VALUE ...] [--write]

dlsweep        `api.run` of the bundled sweep: compile, every chunk, the scikit-learn baseline
               (SVM or OMP) and the Parquet writes, wall time of the whole call.
per-run NumPy  one trajectory's GD by hand (float32, the sweep's dtype): sigma = w+^N - w-^N, the
               squared or exponential loss over seed 0's data, dl/dw+- = +-N w+-^(N-1) dl/dsigma.
per-run JAX    `jax.jit` of a `fori_loop` of GD steps of one trajectory (depth compiled in,
               `jax.grad` of dlsweep's model loss), on seed 0's data.
Both per-run loops are timed over `--probe-steps` steps at every depth of the grid; their
estimate is that time per step times the trajectory-steps each run of the sweep needed (its
`steps_run`), i.e. what a loop that stops each run at its own convergence would take. They
neither track selections or hits nor write anything, which favours them.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from benchmarks import report
from benchmarks.common import machine_info
from dlsweep import api, engine, reproduce, spec, store

RESULTS = Path(__file__).with_name("RESULTS.md")
MODULE = "benchmarks.reproductions"
NAMES = ("gissin-fig3", "gissin-fig6")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    p.add_argument("name", choices=NAMES)
    p.add_argument("--set", dest="overrides", action="append", default=[], help="a spec override, as `dlsweep run --set`")
    p.add_argument("--probe-steps", type=int, default=2_000, help="steps timed per depth for the per-run loops [2000]")
    p.add_argument("--out", help="keep the run folder here, emptied first (default: a temporary folder)")
    p.add_argument("--write", action="store_true", help=f"also write the results into {RESULTS.name} (own section)")
    return p.parse_args(argv)


def _hp(sweep, depth: int) -> dict:
    """One trajectory's hyperparameters: the grid's first sigma0, lr and sparsity at `depth`."""
    hp = {"depth": np.int32(depth), "sigma0": np.float32(sweep.axes["sigma0"][0]), "lr": np.float32(sweep.axes["lr"][0])}
    if "sparsity" in sweep.axes:
        hp["sparsity"] = np.int32(sweep.axes["sparsity"][-1])
    return hp


def numpy_seconds_per_step(model, data: dict, hp: dict, steps: int) -> float:
    """Seconds per GD step of the diagonal network in a plain NumPy float32 loop."""
    n, lr = int(hp["depth"]), np.float32(hp["lr"])
    x = data["x"].astype(np.float32)
    target = np.asarray(model.target(hp, data), np.float32)
    y = x @ target if model.loss_kind == "squared" else data["y"].astype(np.float32)
    plus = np.full(model.d, np.float32(hp["sigma0"]) ** np.float32(1.0 / n), np.float32)
    minus = plus.copy()
    scale = np.float32(1.0 / (n * n * len(y)))
    start = time.perf_counter()
    for _ in range(steps):
        z = x @ (plus**n - minus**n)
        weights = (y - z) if model.loss_kind == "squared" else y * np.exp(-y * z)
        grad_sigma = -scale * (x.T @ weights)
        plus, minus = (plus - lr * n * plus ** (n - 1) * grad_sigma, minus + lr * n * minus ** (n - 1) * grad_sigma)
    return (time.perf_counter() - start) / steps


def jax_seconds_per_step(model, data: dict, hp: dict, steps: int) -> float:
    """Seconds per GD step of one trajectory in a jitted `fori_loop` (compile excluded)."""
    task = {k: jax.numpy.asarray(v) for k, v in data.items()}
    params = model.init(jax.random.key(0), hp, task)

    @jax.jit
    def run(params):
        def step(_, p):
            grads = jax.grad(model.loss)(p, hp, task)
            return jax.tree.map(lambda w, g: w - hp["lr"] * g, p, grads)
        return jax.lax.fori_loop(0, steps, step, params)

    jax.block_until_ready(run(params))
    start = time.perf_counter()
    jax.block_until_ready(run(params))
    return (time.perf_counter() - start) / steps


def main(argv=None) -> int:
    args = parse_args(argv)
    info = machine_info(MODULE)
    sweep = spec.load(reproduce.spec_path(args.name), args.overrides)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.out) if args.out else Path(scratch) / args.name
        start = time.perf_counter()
        run = api.run(sweep, out=folder, overwrite=True, progress_bar=False)
        wall = time.perf_counter() - start
        runs = api.load(folder)
        chunks = [c["runs"] for c in store.chunk_records(folder).values()]
    program, _, task = api.compile_inputs(sweep)
    data = engine.draw_task(program, task, 0, sweep.seed)
    steps_by_depth = runs.groupby("depth").steps_run.sum()
    numpy_s = jax_s = 0.0
    per_depth = []
    for depth, traj_steps in steps_by_depth.items():
        hp = _hp(sweep, int(depth))
        np_step = numpy_seconds_per_step(program.model, data, hp, args.probe_steps)
        jax_step = jax_seconds_per_step(program.model, data, hp, args.probe_steps)
        numpy_s += np_step * traj_steps
        jax_s += jax_step * traj_steps
        per_depth.append(f"| {depth} | {traj_steps:,} | {np_step * 1e6:.1f} | {jax_step * 1e6:.1f} |")
    total = int(runs.steps_run.sum())
    steps_run = runs.set_index("run_id").steps_run
    lockstep = sum((stop - start) * int(steps_run.loc[start:stop - 1].max()) for start, stop in chunks)
    lines = [
        f"# dlsweep benchmark: reproduction {args.name} (full size)", "",
        f"The bundled sweep `sweeps/{args.name}.toml`{' with ' + ', '.join(args.overrides) if args.overrides else ''} "
        f"as one `api.run`, against per-run loops estimated from the steps each run needed (see "
        f"`benchmarks/reproductions.py`).", "",
        "## Machine", "", report.info_block(info), "",
        "## Result", "",
        f"- runs: {len(runs):,}; trajectory-steps run to each run's stop: {total:,} "
        f"(median run {int(runs.steps_run.median()):,} steps, longest {int(runs.steps_run.max()):,}); "
        f"converged: {int(runs.converged.sum()):,}",
        f"- dlsweep wall time: **{wall:.1f} s** (compile {run.compile_seconds:.1f} s, chunk loop "
        f"{run.run_seconds:.1f} s, the rest setup and the baseline)",
        f"- a chunk runs until its slowest run stops: {len(chunks)} chunks executed {lockstep:,} trajectory-steps "
        f"for the {total:,} needed ({lockstep / total:.2g}x); {run.run_seconds / lockstep * 1e6:.2f} us per executed "
        f"trajectory-step",
        f"- per-run NumPy float32 estimate: **{numpy_s:.1f} s**; per-run / dlsweep = **{numpy_s / wall:.3g}**",
        f"- per-run jitted JAX estimate: **{jax_s:.1f} s**; per-run / dlsweep = **{jax_s / wall:.3g}** "
        f"(> 1: dlsweep is faster)", "",
        "| depth | trajectory-steps | NumPy us/step | jitted JAX us/step |", "|---|---|---|---|", *per_depth, "",
    ]
    markdown = "\n".join(lines)
    print(markdown)
    if args.write:
        report.write_section(RESULTS, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
