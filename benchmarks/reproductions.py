"""Every bundled reproduction at full size: dlsweep end to end against the per-run jitted JAX loop
of `benchmarks.per_run`, in one table.

    python -m benchmarks.reproductions [NAME ...] [--sample N] [--write]     # no NAME: all (~40 min)

dlsweep      `reproduce.run(name)` into a temporary folder, timed from outside: every sweep of the
             reproduction (compile, chunks, comparators, Parquet), its thresholds and its figures;
             cold (an empty compilation cache, every program compiled) and, where that took
             under WARM_BELOW seconds, warm (the same again, the programs loaded from that
             cache); of the cold run, the seconds of its sweeps alone (each `api.run`'s compile
             and run: chunks and Parquet, no thresholds or figures). From the chunk records: the
             trajectory-steps the runs needed to their stops (`traj_steps`) and those the chunk
             programs computed (`executed_traj_steps`: lockstep blocks, fillers, hit replays).
per-run jit  per sweep, `per_run.PerRun`: one compile (timed; from a compilation cache of the
             reproduction's own, so a sweep after its first may load the same program, as one
             script calling one jitted function would, and none compiled for another
             reproduction), then N runs per value of the leading
             axis (evenly spread over its block of run ids), each to its own stop; its time is
             the compile plus, per leading-axis value, the sample's seconds per computed step times
             the steps all runs of that value needed (dlsweep's steps_run). A sweep estimated under
             RUN_ALL_BELOW seconds has its remaining runs run too, and its time is measured.
             The loop writes no files, draws no figures, runs no comparator, and has each seed's
             data drawn (`engine.draw_task`, its compile included) before it is timed, which
             favours it.
             Before the first row the process has initialized JAX (a matrix product compiled and
             timed) and matplotlib (one small figure saved), so no row pays a process's one-time
             costs (`benchmarks.startup` times those).
cores        the process asks JAX for one CPU device per core it may use, as the `dlsweep` command
             does (`engine.use_cpu_cores`): `taskset -c 1` measures one core, a wider affinity the
             whole machine, each in a section of its own. dlsweep deals a one-by-one sweep's runs,
             and a batched sweep's chunks past `engine.DEAL_MIN_FLOPS` of work, over the devices;
             the per-run loop runs on the first (XLA may thread its operations).
             On an accelerator the per-run loop's steps are bound by kernel launches and loop
             tests (one H200: 15 us a toy step, 25-30 us a gissin-fig6 step), so a sample of 8
             runs per leading value of a sweep of long runs takes minutes (gissin-depth-separation:
             56 runs of ~230k steps, over 4 minutes); `--sample 1` measures each value's per-step
             rate from one run.
agreement    on every run the per-run loop ran: the same outcome (diverged / converged / neither)
             and steps_run within one check interval (`check_every`) of dlsweep's (the two check
             the stop rule at different steps), and the loss within LOSS_RTOL relative or
             LOSS_ATOL absolute: the final loss where both stopped at the same step, else the loss
             at the last recorded step both reached (a loss a check interval apart is no test).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd
from jax.experimental.compilation_cache import compilation_cache

from benchmarks import report
from benchmarks.common import accelerator, machine_info, on_cores
from benchmarks.per_run import PerRun
from dlsweep import api, engine, reproduce, spec, store

RESULTS = Path(__file__).with_name("RESULTS.md")
MODULE = "benchmarks.reproductions"
TITLE = "# dlsweep benchmark: the reproductions against a per-run jitted JAX loop"
RUN_ALL_BELOW = 20.0            # seconds: a sweep whose per-run estimate is below this is run in full
WARM_BELOW = 60.0               # seconds: a reproduction whose cold run is shorter is run again, warm
LOSS_RTOL, LOSS_ATOL = 1e-3, 1e-6
RATIO_GOAL, EXECUTED_GOAL = 2.0, 1.1
ACCELERATOR_GOALS = {"gissin-fig6": 5.0}    # seconds end to end (cold) on one H100-class accelerator


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", metavar="NAME", help="reproductions (default: all of them)")
    p.add_argument("--sample", type=int, default=8, help="per-run trajectories per value of each sweep's leading axis [8]")
    p.add_argument("--write", action="store_true", help=f"also write the table into {RESULTS.name} (own section)")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in reproduce.REPRODUCTIONS]
    if unknown:
        p.error(f"unknown reproduction(s) {', '.join(unknown)}; known: {', '.join(reproduce.REPRODUCTIONS)}")
    if args.sample < 1:
        p.error(f"--sample: expected an integer >= 1, got {args.sample}")
    args.names = args.names or list(reproduce.REPRODUCTIONS)
    return args


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class SweepResult:
    """One sweep of a reproduction: dlsweep's step counts and the per-run loop's time and agreement."""

    label: str
    runs: int
    needed: int                  # trajectory-steps to each run's stop (dlsweep's steps_run)
    executed: int | None         # trajectory-steps dlsweep's chunk programs computed (None: not recorded)
    has_stop_rule: bool
    compile_seconds: float
    per_run_seconds: float       # compile + runs: measured, or extrapolated from the sample
    measured: bool
    ran: int                     # runs the per-run loop ran
    agreement: dict[str, float]  # `compare` of those runs with dlsweep's
    rates: str                   # us per computed step, per leading-axis value
    gradient_flops: float        # of one trajectory's gradient, XLA's cost analysis (`Program.step_flops`)
    loop_flops_rate: float       # the loop's gradient flops per second over its sample
    longest_steps: int           # steps (dlsweep's steps_run) of the run that needs the most
    longest_seconds: float       # ... at the loop's time per step for its leading-axis value (the mean of the
                                 # value's sampled runs, their calls included)


@dataclasses.dataclass
class Result:
    name: str
    dlsweep_seconds: float | None = None     # None: theory only, no sweep
    warm_seconds: float | None = None        # the same again, its programs loaded from the compilation cache
    sweep_seconds: float = 0.0               # of the cold run, its sweeps' `api.run`: compile, chunks, Parquet
    compile_seconds: float = 0.0             # ... of which compiling
    sweeps: list[SweepResult] = dataclasses.field(default_factory=list)


def run_folders(name: str, root: Path) -> list[Path]:
    """The run folder of each sweep of a reproduction run into `root` (reproduce.run's layout)."""
    folder = root / name
    variants = reproduce.REPRODUCTIONS[name].variants
    return [folder / v.folder for v in variants] if variants else [folder]


def sample(n_runs: int, groups: int, per_group: int) -> np.ndarray:
    """`per_group` run ids evenly spread over each of `groups` equal blocks of consecutive run ids
    (the leading axis is the slowest of the row-major grid, so a block is one of its values)."""
    size = n_runs // groups
    within = np.unique(np.rint(np.linspace(0, size - 1, min(per_group, size))).astype(np.int64))
    return (np.arange(groups)[:, None] * size + within[None, :]).reshape(-1)


def compare(ours: dict[str, np.ndarray], runs, losses, record_steps: np.ndarray, check_every: int) -> dict[str, float]:
    """The per-run loop's summaries against dlsweep's `runs` rows (same order): `stop`, runs with
    the same outcome (diverged / converged / neither) and steps_run within `check_every`, `equal`
    of them with the same steps_run; `loss`, runs whose loss agrees: the final loss where steps_run
    is equal, else the loss at the last recorded step both reached (`losses`: dlsweep's recorded
    loss by (run_id, step)), as the runs stopped at different checks; `agree`, runs with both;
    and the largest |steps_run difference| and relative loss difference."""
    theirs = runs["steps_run"].to_numpy()
    steps = np.abs(ours["steps_run"].astype(np.int64) - theirs)
    outcome = (ours["diverged"] == runs["diverged"].to_numpy()) & (ours["converged"] == runs["converged"].to_numpy())
    stop = outcome & (steps <= check_every)
    equal = steps == 0
    common = np.searchsorted(record_steps, np.minimum(ours["steps_run"], theirs), side="right") - 1
    recorded = losses.reindex(pd.MultiIndex.from_arrays([runs.index.to_numpy(), record_steps[common]])).to_numpy()
    a = np.where(equal, ours["final_loss"], ours["loss"][np.arange(len(common)), common]).astype(np.float64)
    b = np.where(equal, runs["final_loss"].to_numpy(np.float64), recorded)
    both_nan = np.isnan(a) & np.isnan(b)
    absolute = np.where(both_nan, 0.0, np.abs(a - b))
    relative = np.where(both_nan, 0.0, absolute / np.maximum(np.abs(b), np.finfo(np.float64).tiny))
    loss = (absolute <= LOSS_ATOL) | (relative <= LOSS_RTOL)
    return {"agree": int((stop & loss).sum()), "stop": int(stop.sum()), "equal": int(equal.sum()), "loss": int(loss.sum()),
            "max_steps": int(steps.max(initial=0)), "max_loss": float(np.nan_to_num(relative, nan=np.inf).max(initial=0.0))}


def measure_sweep(folder: Path, label: str, per_group: int) -> SweepResult:
    """The per-run loop on the sweep that dlsweep ran into `folder` (its `sweep.toml`)."""
    sweep = spec.load(folder / "sweep.toml")
    runs = api.load(folder, columns=["run_id", "steps_run", "final_loss", "diverged", "converged"]).set_index("run_id")
    records = store.chunk_records(folder).values()
    executed = [r.get("executed_traj_steps") for r in records]
    loop = PerRun.prepare(sweep)
    groups = len(next(iter(sweep.axes.values())))
    ids = sample(len(runs), groups, per_group)
    log(f"    {label}: per-run compile {loop.compile_seconds:.2f} s; sample of {len(ids)} runs ...")
    ours, seconds = loop.run(ids)
    group_of, size = ids // (len(runs) // groups), len(runs) // groups
    steps_run = runs["steps_run"].to_numpy().reshape(groups, size)
    needed = steps_run.sum(axis=1)
    per_step = np.array([seconds[group_of == g].sum() / ours["executed"][group_of == g].sum() for g in range(groups)])
    estimate = loop.compile_seconds + float(per_step @ needed)
    measured = estimate < RUN_ALL_BELOW or len(ids) == len(runs)
    rest = np.setdiff1d(np.arange(len(runs)), ids) if measured else ()
    if len(rest):
        log(f"    {label}: estimated {estimate:.1f} s, so all {len(runs)} runs ...")
        more, more_seconds = loop.run(rest)
        ids = np.concatenate([ids, rest])
        ours = {name: np.concatenate([ours[name], more[name]]) for name in ours}
        seconds = np.concatenate([seconds, more_seconds])
    losses = api.load_trajectories(folder).set_index(["run_id", "step"])["loss"]
    agreement = compare(ours, runs.loc[ids], losses, np.asarray(loop.program.record_steps), sweep.stop.check_every)
    leading = next(iter(sweep.axes))
    rates = ", ".join(f"{value:g}: {rate * 1e6:.3g}" for value, rate in zip(sweep.axes[leading], per_step))
    flops = loop.program.step_flops
    longest_at = np.unravel_index(np.argmax(steps_run), steps_run.shape)
    return SweepResult(label, len(runs), int(needed.sum()), None if None in executed else int(sum(executed)),
                       sweep.stop.rel_loss > 0 or sweep.stop.loss > 0, loop.compile_seconds,
                       loop.compile_seconds + float(seconds.sum()) if measured else estimate, measured, len(ids), agreement,
                       f"{leading} {rates}", flops, flops * float(ours["executed"].sum() / seconds.sum()),
                       int(steps_run[longest_at]), float(steps_run[longest_at] * per_step[longest_at[0]]))


def fresh_cache(folder: str) -> None:
    """JAX's persistent compilation cache in `folder`, on. JAX opens its cache once and then keeps
    using it, whatever `jax_enable_compilation_cache` says later, so it is reset first
    (`compilation_cache.reset_cache`, the public re-export of JAX's way back to an unopened cache)."""
    compilation_cache.reset_cache()
    os.environ[engine.CACHE_ENV] = folder
    jax.config.update("jax_enable_compilation_cache", True)
    engine.use_compilation_cache()


def measure(name: str, per_group: int) -> Result:
    """dlsweep's whole reproduction, then the per-run loop on each of its sweeps, each with a
    compilation cache of its own that starts empty: dlsweep's cold run compiles every program
    (its warm run loads them), the per-run loop compiles its first sweep's trajectory and may load
    it for the reproduction's other sweeps (one script calling one jitted function), and nothing
    either compiled for an earlier reproduction is found. JAX's x64 mode, which a float64 sweep
    switches on, is restored afterwards, so it does not carry over to the next reproduction."""
    if reproduce.REPRODUCTIONS[name].draw is not None:
        return Result(name)
    x64, cache_setting = jax.config.jax_enable_x64, os.environ.get(engine.CACHE_ENV)
    try:
        with (tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as ours,
              tempfile.TemporaryDirectory() as loops):
            fresh_cache(ours)
            seconds, runs = [], []
            for attempt in ("cold", "warm"):
                if attempt == "warm" and seconds[0] > WARM_BELOW:
                    break
                log(f"{name}: dlsweep (reproduce.run), {attempt} compilation cache ...")
                start = time.perf_counter()
                runs.append(reproduce.run(name, out_root=Path(scratch) / attempt, progress_bar=False).runs)
                seconds.append(time.perf_counter() - start)
                log(f"    {seconds[-1]:.1f} s")
            fresh_cache(loops)
            result = Result(name, *seconds, sweep_seconds=sum(r.compile_seconds + r.run_seconds for r in runs[0]),
                            compile_seconds=sum(r.compile_seconds for r in runs[0]))
            for folder in run_folders(name, Path(scratch) / "cold"):
                result.sweeps.append(measure_sweep(folder, folder.name, per_group))
            compilation_cache.reset_cache()
    finally:
        jax.config.update("jax_enable_x64", x64)
        if cache_setting is None:
            os.environ.pop(engine.CACHE_ENV, None)
        else:
            os.environ[engine.CACHE_ENV] = cache_setting
    return result


def row(result: Result) -> tuple[str, float | None, float | None, float | None, tuple[float, float] | None]:
    """A table row of one reproduction, its ratios (cold and warm compilation cache), its
    executed / needed and its two bounds

        layout:   per-run s / sum over sweeps (loop's compile s + the loop's s for the run of most steps),
        end to end:  per-run s / (that sum + dlsweep's s outside its sweeps),

    the first the ratio of a layout that compiles each sweep's program and steps its runs as fast as
    the loop, the sweeps one after another as dlsweep runs them: a step of a run follows the one
    before, so however it batches the other runs such a layout takes no less time (cold compilation
    cache); the second that layout's end to end, with dlsweep's thresholds and figures as they took
    in this run (`reproduce.run` less its sweeps' `api.run` calls)."""
    if result.dlsweep_seconds is None:
        return (f"| {result.name} | theory only, no sweep | — | — | — | — | — | — | — | — | — | — | — |",
                None, None, None, None)
    sweeps = result.sweeps
    runs = sum(s.runs for s in sweeps)
    per_run = sum(s.per_run_seconds for s in sweeps)
    kind = "measured" if all(s.measured for s in sweeps) else "extrapolated" if not any(s.measured for s in sweeps) \
        else "partly extrapolated"
    ratio = per_run / result.dlsweep_seconds
    executed = None if any(s.executed is None for s in sweeps) else sum(s.executed for s in sweeps) / sum(s.needed for s in sweeps)
    ran = sum(s.ran for s in sweeps)
    total = {key: (max if key.startswith("max") else sum)(s.agreement[key] for s in sweeps) for key in sweeps[0].agreement}
    agreement = (f"{total['agree']}/{ran} agree (stop {total['stop']}, equal {total['equal']}; loss {total['loss']}); "
                 f"max Δsteps {total['max_steps']}, max rel Δloss {total['max_loss']:.1e}")
    shown = "not recorded" if executed is None else f"{executed:.3f}"
    warm = None if result.warm_seconds is None else per_run / result.warm_seconds
    warm_cells = "— | —" if warm is None else f"{result.warm_seconds:.1f} | {warm:.2f}"
    warm_seconds, warm_ratio = warm_cells.split(" | ")
    sweep_cell = f"{result.sweep_seconds:.1f} ({result.compile_seconds:.1f})"
    floor = sum(s.compile_seconds + s.longest_seconds for s in sweeps)
    bounds = (per_run / floor, per_run / (floor + result.dlsweep_seconds - result.sweep_seconds))
    return (f"| {result.name} | {runs:,} | {result.dlsweep_seconds:.1f} | {sweep_cell} | {warm_seconds} | "
            f"{per_run:.1f} ({kind}) | **{ratio:.2f}** | {per_run / result.sweep_seconds:.2f} | {warm_ratio} | "
            f"{bounds[0]:.2f} | {bounds[1]:.2f} | {shown} | {agreement} |", ratio, warm,
            executed if any(s.has_stop_rule for s in sweeps) else None, bounds)


def goal_line(what: str, values: dict[str, float], goal: float, at_least: bool) -> str:
    """`what`: met / NOT met, with the worst reproduction."""
    if not values:
        return f"{what}: nothing measured"
    worst = (min if at_least else max)(values, key=values.get)
    met = all(v >= goal if at_least else v <= goal for v in values.values())
    return f"{what}: {'met' if met else 'NOT met'} (worst: {worst} {values[worst]:.2f})"


def bound_lines(bounds: dict[str, tuple[float, float]]) -> list[str]:
    """The reproductions whose bounds (`row`: the layout's, and its end to end with dlsweep's
    thresholds and figures) are under the ratio goal."""
    def under(which: int) -> str:
        names = [f"{name} {pair[which]:.2f}" for name, pair in bounds.items() if pair[which] < RATIO_GOAL]
        return f"{len(names)} of {len(bounds)}: {', '.join(names)}" if names else "none"

    return [f"bound under {RATIO_GOAL:g} (there the cold-cache goal needs a faster compile or faster steps than "
            f"the loop's, not another layout): {under(0)}",
            f"bound with dlsweep's thresholds and figures under {RATIO_GOAL:g} (there the cold-cache goal needs, "
            f"besides, faster thresholds and figures than this run's): {under(1)}"]


MATMUL_SIZE = 1024


def matmul_flops_rate(repeats: int = 5) -> float:
    """This process's floating-point rate on a float32 matrix product of MATMUL_SIZE (JAX's default
    compile options, best of `repeats`): what one step of dense arithmetic can reach here."""
    a = jax.random.normal(jax.random.key(0), (MATMUL_SIZE, MATMUL_SIZE), np.float32)
    product = jax.jit(lambda x: x @ x)
    product(a).block_until_ready()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        product(a).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2.0 * MATMUL_SIZE**3 / best


def render(results: list[Result], info: dict[str, str], per_group: int, matmul_rate: float) -> str:
    rows, ratios, warm_ratios, executed, bounds = [], {}, {}, {}, {}
    for result in results:
        line, ratio, warm, share, bound = row(result)
        rows.append(line)
        if bound is not None:
            bounds[result.name] = bound
        if ratio is not None:
            ratios[result.name] = ratio
        if warm is not None:
            warm_ratios[result.name] = warm
        if share is not None:
            executed[result.name] = share
    details = [f"- {r.name} / {s.label}: {s.runs:,} runs, {s.needed:,} traj-steps needed; per-run compile "
               f"{s.compile_seconds:.2f} s, {s.ran} runs run ({'all' if s.measured else f'up to {per_group} per leading value'}), "
               f"us per computed step by {s.rates}; its longest run {s.longest_steps:,} steps "
               f"({s.longest_steps / max(s.needed, 1):.0%} of those needed), {s.longest_seconds:.3g} s at the loop's "
               f"step time; its gradient {s.gradient_flops:.3g} flops (XLA's cost analysis), "
               f"so the loop computes {s.loop_flops_rate / 1e9:.3g} GFLOP/s ({s.loop_flops_rate / matmul_rate:.0%} of the "
               f"matrix product's)" for r in results for s in r.sweeps]
    device_goals = [f"- {name} full on one accelerator in under {goal:g} s (end to end, cold): "
                    f"{'met' if r.dlsweep_seconds < goal else 'NOT met'} (measured {r.dlsweep_seconds:.1f} s)"
                    for r in results for name, goal in ACCELERATOR_GOALS.items()
                    if accelerator() and r.name == name and r.dlsweep_seconds is not None]
    return "\n".join([
        on_cores(TITLE), "",
        "Each bundled reproduction at full size: dlsweep end to end (`reproduce.run`: sweeps, thresholds, figures) "
        "against the per-run jitted JAX loop of `benchmarks/per_run.py` (one `jax.jit` of a whole trajectory, "
        "compile included, called once per run, each run stopped by the sweep's rule). Per-run times are measured "
        f"where a sweep's estimate is under {RUN_ALL_BELOW:g} s, else extrapolated from {per_group} runs per value "
        "of the leading axis by the trajectory-steps the runs need. Before the first row the process has "
        "initialized JAX (a matrix product compiled) and matplotlib (one small figure saved), so no row pays the "
        "process's one-time costs. The process has one JAX CPU device per core it may use, as the `dlsweep` "
        "command does (`engine.use_cpu_cores`): dlsweep deals the runs of a one-by-one sweep, and the chunks of a "
        "batched sweep of enough work (`Program.deals`), over them; the per-run "
        "loop runs on the first, and XLA may use the other cores inside its operations. "
        "See `benchmarks/reproductions.py`.", "",
        "## Machine", "", report.info_block(info), "",
        "## Result", "",
        "| reproduction | trajectories | dlsweep s (end to end, cold) | of which sweeps s (compiling) "
        "| dlsweep s (warm cache) | per-run jit s | ratio (per-run / dlsweep cold) | ratio, sweeps only "
        "| ratio, warm | bound: ratio at the loop's compile + longest run | bound with dlsweep's thresholds and "
        "figures | executed / needed traj-steps | agreement of the per-run loop's runs with dlsweep's |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|", *rows, "",
        "- " + goal_line(f"ratio >= {RATIO_GOAL:g} on every reproduction (cold compilation cache)", ratios,
                         RATIO_GOAL, True),
        "- " + goal_line(f"ratio >= {RATIO_GOAL:g} on every reproduction run warm (those under {WARM_BELOW:g} s "
                         "cold)", warm_ratios, RATIO_GOAL, True),
        "- " + goal_line(f"executed/needed <= {EXECUTED_GOAL:g} on every reproduction with a stop rule", executed,
                         EXECUTED_GOAL, False), *device_goals,
        *("- " + line for line in bound_lines(bounds)), "",
        "Ratio > 1: dlsweep is faster. Sweeps: the `api.run` calls of the cold run (compile, chunks, Parquet), "
        "without thresholds and figures, which the per-run loop does not make either. "
        "Cold: the first run, every chunk program compiled (into an empty "
        "persistent cache); warm: the same reproduction again, as a user's second run, its programs loaded from "
        f"dlsweep's compilation cache (on by default; measured where the cold run took under {WARM_BELOW:g} s, "
        "where compiling is a sizeable share); the per-run loop's compile is always included, from a cache of the "
        "reproduction's own (its later sweeps may load the first's program; nothing compiled for another "
        "reproduction is found, by either side). Executed / needed: the trajectory-steps dlsweep's chunk programs computed "
        "(blocks run in lockstep, fillers, hit replays) over those its runs needed to their stops. Agreement: a run "
        "agrees when its stop does (same outcome, steps_run within one check interval) and its loss does (within "
        f"{LOSS_RTOL:g} relative or {LOSS_ATOL:g} absolute: the final loss where both stopped at the same step, "
        "else the loss at the last recorded step both reached); `equal`: stopped at the same step. "
        "Bound: per-run s / the sum over sweeps of (the loop's compile + the loop's time for the sweep's run of "
        "most steps, its steps at the loop's time per step for its value of the leading axis): the ratio of a "
        "layout that compiles and steps as fast as the loop and runs the sweeps one after another, with every "
        "other run, the thresholds and the figures free. A run's steps follow one another, so however it batches the "
        "other runs such a layout takes no less time; where the bound is under the goal, the cold-cache goal "
        "asks for a faster compile or faster steps than the loop's, not for another layout (dlsweep's own "
        "compile is at times faster than the loop's, so its sweeps alone can pass the bound). Bound with "
        "dlsweep's thresholds and figures: per-run s / (that sum + dlsweep's end to end less its sweeps, the "
        "thresholds and figures as long as they took in this run): such a layout's end-to-end ratio, "
        "where those are as fast as dlsweep's.", "",
        f"Below, each loop's arithmetic rate: its gradient's floating-point operations (XLA's cost analysis, the "
        f"flops `engine.step_cost` weighs) per second of its steps, against this process's "
        f"{matmul_rate / 1e9:.0f} GFLOP/s on a float32 {MATMUL_SIZE} x {MATMUL_SIZE} matrix product. A loop that "
        "already computes a large share of it leaves batching its runs little to gain on this core.", "",
        "### Per sweep", "", *details, "",
    ])


def warm_figures() -> None:
    """matplotlib's one-time costs (its import, the font list, the mathtext parser), paid here
    by one small figure in dlsweep's style, so that the first reproduction is measured as the
    others are; `benchmarks.startup` times a fresh process's imports."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from dlsweep import plot

    with matplotlib.rc_context(fname=plot.STYLE), tempfile.TemporaryDirectory() as folder:
        figure = Figure(figsize=(2, 2), layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots()
        axes.loglog([1e-3, 1e-1], [1, 10])
        axes.set_xlabel(r"$\sigma_0$")
        figure.savefig(Path(folder) / "warm.png")


def main(argv=None) -> int:
    args = parse_args(argv)
    engine.use_cpu_cores()      # as the `dlsweep` command: one CPU device per core of this process's affinity
    info = machine_info(MODULE) | {"DLSWEEP_CACHE_DIR": os.environ.get("DLSWEEP_CACHE_DIR", "(unset)")}
    results = []
    matmul_rate = matmul_flops_rate()      # also JAX's backend and a first compile, before any row
    log(f"float32 {MATMUL_SIZE}^3 matrix product: {matmul_rate / 1e9:.0f} GFLOP/s")
    warm_figures()
    for name in args.names:
        results.append(measure(name, args.sample))
        markdown = render(results, info, args.sample, matmul_rate)
        if args.write:                            # after each reproduction: an interrupted run keeps its rows
            report.write_section(RESULTS, markdown)
    print(markdown)
    if args.write:
        log(f"wrote the reproductions section of {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
