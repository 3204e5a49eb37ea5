"""dlsweep vs. the usual ways of running the toy-model sweep, in one run on one core; then the
deep matrix sensing benchmark, the reproductions table, the start-up times and the engine's
layouts of a block, each its own section of RESULTS.md.

    taskset -c 0 python -m benchmarks [--write]     # toy: 100,002 trajectories x 10,000 steps (~ minutes),
                                                    # then matrix sensing and every reproduction (~ 1 hour)
    taskset -c 0 python -m benchmarks --only toy    # the toy benchmark alone
    taskset -c 0 python -m benchmarks --quick       # the toy benchmark at small sizes, < 1 minute

See benchmarks/__init__.py and the module docstrings for what each row measures.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

from benchmarks import baselines, report
from benchmarks.common import DEPTHS, LEVELS, LR, SIGMA0_LOG10, SIGMA_STAR, Problem, accelerator, machine_info, on_device

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTIONS = ("toy", "matrix-sensing", "reproductions", "startup", "layouts")

QUICK = {"trajectories": 6_000, "steps": 2_000, "numpy_sample": 6, "jax_sample": 60, "numpy_batch": 3_000,
         "ceiling_batch": 16_384, "repeats": 3}
FULL = {"trajectories": 100_000, "steps": 10_000, "numpy_sample": 60, "jax_sample": 1_200, "numpy_batch": 10_000,
        "ceiling_batch": 16_384, "repeats": 5}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Toy-model sweep: dlsweep end-to-end vs. per-run NumPy, per-run jitted JAX, batched NumPy, "
                    "and a fused-kernel ceiling. Run it pinned to one core: taskset -c 0 python -m benchmarks")
    p.add_argument("--quick", action="store_true", help="small sizes (< 1 minute); explicit options still win")
    p.add_argument("--trajectories", "-n", type=int, help="trajectories in the dlsweep sweep, rounded up to a "
                   f"multiple of {len(DEPTHS)} (depths x sigma0) [100000 -> 100002; quick 6000]")
    p.add_argument("--steps", type=int, help="GD steps per trajectory [10000; quick 2000]")
    p.add_argument("--numpy-sample", type=int, help="trajectories timed for the per-run NumPy loop [60; quick 6]")
    p.add_argument("--numpy-steps", type=int, help="steps per trajectory for the per-run NumPy loop [--steps]")
    p.add_argument("--jax-sample", type=int, help="trajectories timed for the per-run jitted JAX loop [1200; quick 60]")
    p.add_argument("--numpy-batch", type=int, help="batch size of the batched NumPy loop [10000; quick 3000]")
    p.add_argument("--numpy-batch-steps", type=int, help="steps of the batched NumPy loop [--steps]")
    p.add_argument("--ceiling-batch", type=int, help="trajectories per depth in the ceiling kernel [16384]")
    p.add_argument("--ceiling-steps", type=int, help="steps of the ceiling kernel [--steps]")
    p.add_argument("--repeats", type=int, help="repeats of each ceiling kernel, best taken [5; quick 3]")
    p.add_argument("--unroll", default="1,2", help="fori_loop unroll factors tried for the ceiling kernel, "
                   "comma-separated; the best is taken [1,2]")
    p.add_argument("--chunk-size", type=int, default=None, help="dlsweep chunk size [dlsweep's default]")
    p.add_argument("--workdir", default=None, help="where dlsweep's temporary output folder goes [system temp]")
    p.add_argument("--write", action="store_true", help="also write the results to benchmarks/RESULTS.md")
    p.add_argument("--only", help=f"comma-separated sections to run (always in the order {', '.join(SECTIONS)}) [all "
                   "of them; with --quick: toy]; --quick runs matrix sensing at its --quick sizes, the reproductions are "
                   "always full size")
    args = p.parse_args(argv)
    args.only = tuple(s.strip() for s in args.only.split(",")) if args.only else ("toy",) if args.quick else SECTIONS
    unknown = [s for s in args.only if s not in SECTIONS]
    if unknown or not args.only:
        p.error(f"--only: expected comma-separated sections of {', '.join(SECTIONS)}, got {','.join(args.only)}")
    defaults = QUICK if args.quick else FULL
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for key in ("numpy_steps", "numpy_batch_steps", "ceiling_steps"):
        if getattr(args, key) is None:
            setattr(args, key, args.steps)
    for key in ("trajectories", "steps", "numpy_sample", "numpy_steps", "jax_sample", "numpy_batch",
                "numpy_batch_steps", "ceiling_batch", "ceiling_steps", "repeats"):
        if getattr(args, key) < 1:
            p.error(f"--{key.replace('_', '-')}: expected an integer >= 1, got {getattr(args, key)}")
    try:
        args.unroll = tuple(int(u) for u in args.unroll.split(","))
    except ValueError:
        args.unroll = ()
    if not args.unroll or min(args.unroll) < 1:
        p.error("--unroll: expected comma-separated integers >= 1, e.g. 1,2")
    return args


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cross_check(name: str, measured, dl_runs) -> str:
    from benchmarks.common import compare_hits
    from benchmarks.toy import hits_of

    if measured.hits is None:
        return f"{name}: not compared (ran fewer steps than the sweep)"
    return compare_hits(name, measured.hits, hits_of(dl_runs, measured.run_ids))


def main(argv=None) -> int:
    from dlsweep import engine

    args = parse_args(argv)
    engine.use_cpu_cores()      # as the `dlsweep` command, before JAX starts: every section sees the same devices
    if "toy" in args.only:
        run_toy(args)
    if "matrix-sensing" in args.only:
        from benchmarks import matrix_sensing

        log("matrix sensing (benchmarks.matrix_sensing) ...")
        matrix_sensing.main([*(["--quick"] if args.quick else []), *(["--write"] if args.write else [])])
    if "reproductions" in args.only:
        from benchmarks import reproductions

        log("the reproductions (benchmarks.reproductions) ...")
        reproductions.main(["--write"] if args.write else [])
    if "startup" in args.only:
        from benchmarks import startup

        log("start-up (benchmarks.startup) ...")
        startup.main(["--write"] if args.write else [])
    if "layouts" in args.only:
        from benchmarks import layouts

        log("the layouts of a block (benchmarks.layouts) ...")
        layouts.main(["--write"] if args.write else [])
    return 0


def run_toy(args) -> None:
    """The toy-model benchmark: every row, printed and (`--write`) written as its own section."""
    info = machine_info()
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if affinity != 1:
        log(f"warning: this process may use {affinity} cores; for comparable numbers run "
            "`taskset -c 0 python -m benchmarks ...`")
    problem = Problem(n_sigma0=math.ceil(args.trajectories / len(DEPTHS)), steps=args.steps)
    full_traj_steps = problem.n * problem.steps
    log(f"{problem.n} trajectories x {problem.steps} steps = {full_traj_steps:.3g} traj-steps; "
        f"cores in affinity: {affinity}")

    from benchmarks import toy

    log("1/5 dlsweep end-to-end (api.run) ...")
    dl = toy.run_dlsweep(problem, chunk_size=args.chunk_size, workdir=args.workdir)
    log(f"    compile {dl.compile.wall:.2f} s, run {dl.run.wall:.2f} s, whole {dl.total.wall:.2f} s; checks {dl.checks}")
    if not dl.checks["steps_run == steps for all"] or dl.checks["diverged"] or dl.checks["converged"]:
        raise SystemExit(f"dlsweep sweep did not run every trajectory for all steps: {dl.checks}")

    no_hits_compile, no_hits_run = toy.engine_without_hits(problem, chunk_size=args.chunk_size)
    log(f"    without hitting times (levels = []): compile {no_hits_compile.wall:.2f} s, run {no_hits_run.wall:.2f} s")
    cores = toy.with_another_core(os.sched_getaffinity(0), set(range(os.cpu_count()))) if accelerator() is None else None
    two = None if cores is None else toy.overlap(problem, cores, chunk_size=args.chunk_size, workdir=args.workdir)
    if two is not None:
        log(f"    on cores {two.cores}: chunk programs {two.engine:.2f} s, whole call less its compile {two.whole:.2f} s")

    log(f"2/5 per-run NumPy f64, {args.numpy_sample} trajectories x {args.numpy_steps} steps ...")
    np_run = baselines.per_run_numpy(problem, args.numpy_sample, args.numpy_steps)
    log(f"    {np_run.timing.wall:.2f} s")
    log(f"3/5 per-run jitted JAX, {args.jax_sample} trajectories x {args.steps} steps ...")
    jax_run = baselines.per_run_jax(problem, args.jax_sample, args.steps)
    log(f"    {jax_run.timing.wall:.2f} s (+ compile {jax_run.compile.wall:.2f} s)")
    log(f"4/5 batched NumPy f32, batch {args.numpy_batch} x {args.numpy_batch_steps} steps ...")
    np_batch = baselines.batched_numpy(problem, args.numpy_batch, args.numpy_batch_steps)
    log(f"    {np_batch.timing.wall:.2f} s")
    log(f"5/5 ceiling: fused fixed-depth kernel, (4, {args.ceiling_batch}) x {args.ceiling_steps} steps per depth ...")
    ceil = baselines.ceiling(problem, args.ceiling_batch, args.ceiling_steps, args.repeats, args.unroll)
    log(f"    {ceil.timing.wall:.2f} s")

    n = problem.n
    run_row = report.Row("dlsweep: compiled chunk programs (engine alone)",
                         f"all {n:,} x {problem.steps:,}", dl.traj_steps, dl.run.wall, dl.run.cpu, dl.compile.wall)
    whole_row = report.Row("dlsweep: whole `api.run` call (compile + run + Parquet)",
                           f"all {n:,} x {problem.steps:,}", dl.traj_steps, dl.total.wall, dl.total.cpu)
    lean_row = report.Row("dlsweep: whole `api.run` call, no trajectories table (`[record] trajectories = false`)",
                          f"all {n:,} x {problem.steps:,}", dl.traj_steps, dl.lean.wall, dl.lean.cpu)
    no_hits_row = report.Row("dlsweep: engine alone, no hitting times (`levels = []`)", f"all {n:,} x {problem.steps:,}",
                             dl.traj_steps, no_hits_run.wall, no_hits_run.cpu, no_hits_compile.wall)
    rows = [
        run_row,
        whole_row,
        lean_row,
        no_hits_row,
        report.Row("per-run NumPy loop, f64 (the papers' way)", f"sample {np_run.detail}", np_run.traj_steps,
                   np_run.timing.wall, np_run.timing.cpu, extrapolated=True),
        report.Row("per-run jitted JAX `fori_loop`, f32, Python loop over runs", f"sample {jax_run.detail}",
                   jax_run.traj_steps, jax_run.timing.wall, jax_run.timing.cpu, jax_run.compile.wall, extrapolated=True),
        report.Row("batched NumPy, f32, grouped by depth", np_batch.detail, np_batch.traj_steps,
                   np_batch.timing.wall, np_batch.timing.cpu, extrapolated=np_batch.traj_steps < full_traj_steps),
        report.Row("ceiling: fused fixed-depth JAX kernel, (k, B), no hit tracking",
                   f"{len(DEPTHS)} depths x (4, {args.ceiling_batch}) x {args.ceiling_steps:,}, best of "
                   f"{args.repeats} x unroll {'/'.join(map(str, args.unroll))}",
                   ceil.traj_steps, ceil.timing.wall, ceil.timing.cpu, ceil.compile.wall, extrapolated=True),
    ]
    other = dl.total.wall - dl.report_compile_seconds - dl.run.wall
    fraction = run_row.rate / rows[-1].rate
    targets = target_lines(run_row.rate / rows[4].rate, fraction, no_hits_row.rate / rows[-1].rate,
                           (dl.total.wall - dl.report_compile_seconds) / dl.run.wall,
                           run_row.rate if accelerator() else None, two)
    print("\n".join(targets), file=sys.stderr)
    notes = [
        *targets,
        f"dlsweep's chunk programs reach **{fraction:.1%}** of the ceiling (compute, wall time); "
        f"{run_row.cpu_rate / rows[-1].cpu_rate:.1%} by CPU time.",
        f"dlsweep whole call: {dl.total.wall:.2f} s, of which compile (or its load from the compilation cache) "
        f"{dl.report_compile_seconds:.2f} s; engine alone: compile {dl.compile.wall:.2f} s + chunk programs "
        f"{dl.run.wall:.2f} s, so tables, Parquet and manifest add {other:.2f} s (after overlap); {dl.n_chunks} chunks of {dl.chunk_size}, "
        f"{dl.record_points} recorded steps per trajectory, {dl.output_bytes / 2**20:.0f} MiB written.",
        f"Without the trajectories table (`[record] trajectories = false`, the same runs table): whole call "
        f"{dl.lean.wall:.2f} s, less its compile ({dl.lean_compile_seconds:.2f} s) "
        f"{(dl.lean.wall - dl.lean_compile_seconds) / dl.run.wall:.2f}x the chunk "
        f"programs; {dl.lean_bytes / 2**20:.1f} MiB written. The goal is of the sweep as specified, with its "
        f"trajectories.",
        *([] if two is None else [
            f"On {len(two.cores)} cores ({','.join(map(str, two.cores))}; a child process, `benchmarks.toy.overlap`, "
            f"best of {two.repeats} alternated passes each): chunk programs {two.engine:.2f} s, whole `api.run` call "
            f"less its compile {two.whole:.2f} s ({two.whole / two.engine:.2f}x). The writing of a chunk (pandas "
            f"tables, Parquet, fsync) runs on the main thread while XLA computes the next chunk on its own: "
            f"on one core the two share it, so the whole call there is the sum of both."]),
        f"Checks: {dl.checks}.",
        cross_check("per-run NumPy f64", np_run, dl.runs),
        cross_check("per-run JAX", jax_run, dl.runs),
        cross_check("batched NumPy f32", np_batch, dl.runs),
        f"Ceiling detail: {ceil.detail}.",
    ]
    md = render(args, info, problem, rows, run_row, whole_row, full_traj_steps, notes)
    print(md)
    if args.write:
        report.write_section(RESULTS, md)
        log(f"wrote {RESULTS}")


TARGETS = (("toy with exact hits at 3 levels: dlsweep engine / per-run NumPy", ">=", 2500.0),
           ("toy with exact hits at 3 levels: fraction of the ceiling", ">=", 0.30),
           ("toy without hitting times: fraction of the ceiling", ">=", 0.70),
           ("toy whole `api.run` call (less its compile) / its chunk programs", "<=", 1.3))
ACCELERATOR_RATE = 5e11    # trajectory-steps/s of the engine with hits on one H100-class accelerator


def target_lines(speedup_vs_numpy: float, fraction_of_ceiling: float, fraction_without_hits: float,
                 whole_over_engine: float, accelerator_rate: float | None = None, two=None) -> list[str]:
    """Each target of the benchmark with the measured ratio and whether it was met; the whole
    call's also on two cores (`two`, a `toy.Overlap`) where measured; on an accelerator also the
    engine's trajectory-steps per second."""
    lines = []
    measured = [[("", speedup_vs_numpy)], [("", fraction_of_ceiling)], [("", fraction_without_hits)],
                [(" on this process's core" if two is not None else "", whole_over_engine)]]
    if two is not None:
        measured[3].append((f" on {len(two.cores)} cores (the writing beside the computing)", two.whole / two.engine))
    for (what, sense, target), values in zip(TARGETS, measured):
        for where, value in values:
            shown = f"{value:.3g}x" if target > 1 else f"{value:.1%}"
            wanted = f"{target:g}x" if target > 1 else f"{target:.0%}"
            met = value >= target if sense == ">=" else value <= target
            lines.append(f"target {what}{where} {sense} {wanted}: measured {shown}: {'met' if met else 'NOT met'}")
    if accelerator_rate is not None:
        met = accelerator_rate >= ACCELERATOR_RATE
        lines.append(f"target toy with exact hits at 3 levels on one accelerator: traj-steps/s >= {ACCELERATOR_RATE:.0e}: "
                     f"measured {accelerator_rate:.3g}: {'met' if met else 'NOT met'}")
    return lines


def render(args, info, problem, rows, run_row, whole_row, full_traj_steps, notes) -> str:
    sizes = ("full" if not args.quick else "quick")
    return f"""{on_device("# dlsweep benchmark: toy model of depth")}

Sweep: {problem.n:,} trajectories ({len(DEPTHS)} depths {DEPTHS[0]}..{DEPTHS[-1]} x {problem.n_sigma0:,} sigma0
log-spaced 1e{SIGMA0_LOG10[0]:g}..1e{SIGMA0_LOG10[1]:g}) x {problem.steps:,} GD steps, lr {LR:g}, sigma* = {SIGMA_STAR},
hitting levels {LEVELS}, dlsweep in float32 with `stop.rel_loss = 0` (no early stop; every trajectory runs all
steps, checked). {full_traj_steps:.3g} trajectory-steps in all. Sizes: {sizes}.

## Machine

{report.info_block(info)}

## Results (one process, {"one core" if accelerator() is None else "one accelerator"}; rates by wall time unless marked CPU)

{report.table(rows, run_row, whole_row, full_traj_steps)}

"dlsweep run ÷ this" divides dlsweep's compute throughput (first row) by the row's; for the ceiling it is
the fraction of the machine's limit that dlsweep reaches. "full sweep at this rate" is the time the whole
sweep would take at the row's throughput (extrapolated from the timed sample where marked).

{chr(10).join(f"- {n}" for n in notes)}

## What each row measures

- **dlsweep: compiled chunk programs (engine alone)** — the sweep set up as `dlsweep.api.run` does
  (`api.compile_inputs`, same chunk size), compiled once with `engine.compile_chunk`, then every chunk
  called (`jit(vmap(...))` program plus copying results to NumPy); no tables or files.
- **dlsweep: engine alone, no hitting times** — the same, on the sweep with `[record] levels = []`:
  GD steps, stop checks and recorded steps only.
- **dlsweep: whole `api.run` call** — `dlsweep.api.run` on the same sweep (spec dict through
  `dlsweep.spec.resolve`, `progress_bar=False`, output to a temporary folder), timed from outside:
  compile, chunks, pandas tables, Parquet writing and manifest; the writing of one chunk overlaps the
  computing of the next.
- **dlsweep: whole `api.run` call, no trajectories table** — the same call on the same sweep with
  `[record] trajectories = false`: the same chunk programs, the runs table alone written (checked
  equal to the first call's).
- **per-run NumPy loop, f64** — one trajectory at a time, a Python loop over steps on NumPy arrays of
  size k = 4, `w ** N`, hit check every step; timed on a sample spread over the grid, extrapolated.
- **per-run jitted JAX** — one `jax.jit`-compiled `fori_loop` per trajectory (depth a traced int32, powers
  by masked repeated multiply, so it compiles once; compile excluded), called in a Python loop, f32, hit
  check every step; timed on a sample, extrapolated.
- **batched NumPy, f32** — a batch of trajectories vectorized in NumPy, grouped by depth (static integer
  powers by in-place repeated multiply), state (k, B) with the batch on the minor axis, hit check
  every step.
- **ceiling** — the same GD arithmetic as one fused elementwise XLA kernel per depth (depth fixed at compile
  time, `fori_loop` over steps on a (k, B) f32 array, B in the cache-friendly range), no hit tracking,
  no stop checks, no records; per depth the best over repeats and `fori_loop` unroll factors. Its throughput for the depth mix is the total
  trajectory-steps over the summed per-depth times.

Every baseline except the ceiling does what dlsweep does per step (GD update and first-hitting steps
for 3 levels); their first-hitting steps are compared with dlsweep's above. The machine is shared: compare
rows of one run, and look at the CPU columns when wall and CPU differ.
"""


if __name__ == "__main__":
    sys.exit(main())
