"""The verbs of dlsweep as Python functions; `dlsweep.cli` is a thin shell over these."""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlsweep import compare, engine, grid, models, optimizers, progress, store
from dlsweep import spec as spec_module
from dlsweep.analysis import incremental
from dlsweep.figures import FIGURE_SUFFIXES, NEEDS_TARGETS, PLOT_KINDS
from dlsweep.models import linear_net
from dlsweep.plan import Columns, Disk, Outcome, Plan, chunk_size_notes, grid_too_large, size_line
from dlsweep.spec import Sweep
from dlsweep.store import load, load_trajectories
from dlsweep.warning import DlsweepWarning

__all__ = ["RunReport", "run", "plan_run", "thresholds", "plot_run", "show", "list_models", "load", "load_trajectories", "default_folder"]

THRESHOLDS_FILE = "thresholds.parquet"


@dataclasses.dataclass(frozen=True)
class RunReport:
    """What one `run` call did. `run_seconds` is the wall time of the chunk loop: compute, tables
    and Parquet writing, overlapped (compile time not included). `outcome` counts how the
    trajectories of every finished chunk of the folder ended (None while none is finished)."""

    folder: Path
    n_runs: int
    chunks_run: int
    chunks_skipped: int
    chunks_missing: int
    compile_seconds: float
    run_seconds: float
    traj_steps: int
    outcome: Outcome | None = None

    @property
    def traj_steps_per_second(self) -> float:
        return self.traj_steps / self.run_seconds if self.run_seconds > 0 else float("nan")


def default_folder(sweep: Sweep) -> Path:
    return Path("runs") / sweep.name


def _use_dtype(dtype: str) -> None:
    """float64 needs JAX's x64 mode, switched on before the sweep's arrays exist (the verbs that
    compute restore the caller's mode when they return: `_restores_x64`)."""
    if dtype == "float64":
        import jax

        jax.config.update("jax_enable_x64", True)


def _restores_x64(verb):
    """A verb that may switch JAX's x64 mode on for a float64 sweep leaves the caller's mode as it
    found it: what it returns is NumPy and pandas, so no array outlives the switch."""
    @functools.wraps(verb)
    def restoring(*args, **kwargs):
        import jax

        before = jax.config.jax_enable_x64
        try:
            return verb(*args, **kwargs)
        finally:
            if jax.config.jax_enable_x64 != before:
                jax.config.update("jax_enable_x64", before)

    return restoring


def compile_inputs(sweep: Sweep) -> tuple[engine.Program, grid.Grid, dict]:
    """The static program, the flat grid and the shared task of a sweep (x64 switched on first
    for float64 sweeps); the program's layout (refilled slots, or runs one after another) is
    chosen from the cost of its step (`engine.with_layout`)."""
    _use_dtype(sweep.dtype)
    family = sweep.family
    task = family.make_task(sweep)
    program = engine.Program.from_sweep(sweep, family.build(sweep))
    program = engine.with_layout(program, list(sweep.axes), task, sweep.n_runs)
    return program, grid.build(sweep.axes), task


def default_chunk_size(program: engine.Program, n_runs: int, hp_names: list[str], task: dict, cycle: int = 1,
                       small: int | None = None) -> int:
    """Chunk size for `n_runs` trajectories from XLA's memory analysis of the chunk program, within
    the memory budget and the backend's useful maximum, whole smallest batches of the program
    (`cycle` seeds of a per-seed layout), then the batch compiled for it (`engine.compiled_batch`),
    so only the last chunk of a group has fillers. A grid no larger than the analysis's probe
    batch, or one whose largest chunk stays far below the budget by a bound found without
    compiling (`engine.rough_bytes`), is cut by the maximum alone: the program is compiled once.
    A small sweep (`engine.small_sweep_batch`) is one chunk of its `small` runs."""
    if small:
        return small
    period = cycle if cycle > 1 else None
    multiple = engine.compiled_batch(1, period)
    budget = engine.memory_budget()
    fixed, per_trajectory = engine.rough_bytes(program, hp_names, task, cycle)
    largest = engine.compiled_batch(min(n_runs, engine.max_chunk()), period)
    if n_runs <= engine.PROBE_BATCH or fixed + largest * per_trajectory <= budget // engine.ROUGH_SHARE:
        size = grid.chunk_size_for(n_runs, 1, cap=engine.max_chunk(), multiple=multiple)
    else:
        size = grid.chunk_size_for(n_runs, engine.bytes_per_trajectory(program, hp_names, task),
                                   budget=engine.memory_budget(), cap=engine.max_chunk(), multiple=multiple)
    return engine.compiled_batch(size, period)


def seed_cycle(sweep: Sweep, program: engine.Program) -> int:
    """The number of seeds of a sweep's per-seed layout (`engine.seed_slots`: the data drawn once
    per seed, whatever the chunk size); 1 for any other sweep."""
    return len(engine.seed_slots(program.model, sweep.axes) or ()) or 1


def _seed_period(sweep: Sweep, program: engine.Program) -> int | None:
    """`seed_cycle` as the engine's `period`: None for a sweep without a per-seed layout."""
    cycle = seed_cycle(sweep, program)
    return cycle if cycle > 1 else None


def small_batch(sweep: Sweep, program: engine.Program) -> int | None:
    """The batch of a sweep smaller than one vector block (`engine.small_sweep_batch`), else None."""
    return engine.small_sweep_batch(sweep.n_runs, _seed_period(sweep, program))


def chunk_group(sweep: Sweep, program: engine.Program) -> int:
    """The run ids a chunk never straddles (`grid.aligned_group`), given the smallest batch the
    sweep's program computes on one device (`engine.compiled_batch`; not the local device count,
    which would make the layout, and so the roundings, depend on the machine)."""
    return grid.aligned_group(sweep.axes, engine.compiled_batch(1, _seed_period(sweep, program), devices=1))


def compile_sweep(sweep: Sweep, program: engine.Program, task: dict, size: int, group: int) -> engine.CompiledChunk:
    """The chunk program of a sweep for chunks of `size` that never straddle `group` run ids
    (`grid.aligned_group`): the axes with one value per chunk enter it unbatched, and data drawn
    per seed is kept once per seed in the sweep's per-seed layout (`engine.seed_slots`)."""
    follows_leading = group < sweep.n_runs
    return engine.compile_chunk(program, size, list(sweep.axes), task, sweep.seed,
                                constant=grid.constant_axes(sweep.axes, follows_leading),
                                seeds=engine.seed_slots(program.model, sweep.axes), small=small_batch(sweep, program))


def _prepared(spec: str | Path | Sweep | Mapping, out, overrides: Sequence[str], chunk_size: int | None,
              max_chunks: int | None, overwrite: bool, shard: tuple[int, int] | None,
              model: Any = None) -> tuple[Sweep, Path, engine.Program, grid.Grid, dict]:
    """The sweep of a run with every argument checked, its folder, program, flat grid and task. A
    grid too large for memory is refused from its axis sizes, before the flat grid exists."""
    sweep = _sweep_of(spec, overrides, model)
    spec_module.check_counts({"chunk_size": chunk_size, "max_chunks": max_chunks})
    if sweep.compare and not compare.available(sweep.family.baseline(sweep.task).requires):
        # checked when run, so its results load anywhere
        raise spec_module.SpecError(f"{sweep.source}: key 'compare': the baselines need scikit-learn: {compare.INSTALL}")
    if shard is not None:
        if not (len(shard) == 2 and all(type(v) is int for v in shard) and 1 <= shard[0] <= shard[1]):
            raise spec_module.SpecError(f"shard={shard!r}: expected (K, N) with 1 <= K <= N")
        if overwrite:
            raise spec_module.SpecError(f"overwrite=True cannot be combined with shard={shard!r} (other shards share the folder)")
    too_large = grid_too_large({axis: len(values) for axis, values in sweep.axes.items()})
    if too_large:
        raise spec_module.SpecError(f"{sweep.source}: key 'axes': {too_large}")
    folder = Path(out) if out is not None else default_folder(sweep)
    program, flat, task = compile_inputs(sweep)
    spec_module.warn_if_seeds_identical(sweep, program.model, task)
    return sweep, folder, program, flat, task


def _sweep_of(spec: str | Path | Sweep | Mapping, overrides: Sequence[str], model: Any) -> Sweep:
    """The resolved sweep of a spec file, a raw spec mapping or a Sweep; `model`, a model object,
    in place of the spec's `model` (`spec.resolve`)."""
    if isinstance(spec, Sweep):
        if model is not None:
            raise spec_module.SpecError("model=...: give the model with a spec file or mapping, not a resolved Sweep")
        return spec
    if isinstance(spec, Mapping):
        raw = dict(spec)
        overridden = spec_module.apply_overrides(raw, overrides, "<memory>")
        return spec_module.resolve(raw, overridden=overridden, model=model)
    return spec_module.load(spec, overrides, model=model)


def _disk(sweep: Sweep, program: engine.Program, task: dict, n_chunks: int) -> Disk:
    """The disk a sweep's tables take, estimated from one trajectory's shapes."""
    return Disk.estimate(sweep.n_runs, len(sweep.axes), n_chunks,
                         len(program.record_steps), Columns.of(program, list(sweep.axes), task), sweep.dtype)


def _chunks_to_run(plan: list[grid.Chunk], finished: set[int], shard: tuple[int, int] | None,
                   max_chunks: int | None) -> list[grid.Chunk]:
    """The chunks a call runs: the unfinished ones of its shard (K, N) (chunks K-1, K-1+N, ...),
    at most `max_chunks` of them."""
    todo = [c for c in plan if c.index not in finished and (shard is None or c.index % shard[1] == shard[0] - 1)]
    return todo if max_chunks is None else todo[:max_chunks]


def _fresh_manifest(sweep: Sweep, program: engine.Program, flat: grid.Grid, task: dict, chunk_size: int | None,
                    group: int) -> dict:
    """The manifest of a new run folder: its chunk plan, of `chunk_size` or the default chunk size."""
    size = chunk_size or default_chunk_size(program, group, list(flat.columns), task, seed_cycle(sweep, program),
                                            small_batch(sweep, program))
    return store.new_manifest(sweep, flat.size, size, len(grid.chunks(flat.size, size, group)), group)


@_restores_x64
def plan_run(spec: str | Path | Sweep, out: str | Path | None = None, overrides: Sequence[str] = (),
             chunk_size: int | None = None, overwrite: bool = False, max_chunks: int | None = None,
             shard: tuple[int, int] | None = None, model: Any = None) -> Plan:
    """What `run` with these arguments would do, found without writing anything: the sweep's axes
    and size, the chunk plan (the folder's, when it resumes one), and the estimated disk. The
    default chunk size costs what it costs a run: a probe compile of the chunk program. What run
    would warn about the folder and the chunk size, this warns too."""
    sweep, folder, program, flat, task = _prepared(spec, out, overrides, chunk_size, max_chunks, overwrite, shard, model)
    group = chunk_group(sweep, program)
    try:
        manifest = None if overwrite or not folder.is_dir() else store.read_manifest(folder)
    except store.StoreError as err:
        warnings.warn(f"run would refuse this folder as it is: {err}", DlsweepWarning, stacklevel=2)
        manifest = None
    if manifest is not None and manifest["spec_hash"] != sweep.spec_hash():
        warnings.warn(f"{folder} holds a different sweep; run refuses it unless it starts over (overwrite=True)",
                      DlsweepWarning, stacklevel=2)
        manifest = None
    if manifest is None:
        manifest = _fresh_manifest(sweep, program, flat, task, chunk_size, group)
        finished, source = set(), "given" if chunk_size else "from the memory estimate"
    else:
        finished, source = store.finished_chunks(folder), "fixed by the folder"
    chunks = grid.chunks(flat.size, manifest["chunk_size"], manifest["group"])
    for note in chunk_size_notes(chunk_size, manifest, folder, chunks, sweep.axes):
        warnings.warn(note, DlsweepWarning, stacklevel=2)
    constant = grid.constant_axes(sweep.axes, manifest["group"] < flat.size)
    return Plan(folder=folder, name=sweep.name, model=sweep.model, dtype=sweep.dtype, steps=sweep.steps,
                recorded_steps=len(program.record_steps), axes=dict(sweep.axes), chunk_size=manifest["chunk_size"],
                chunk_size_from=source, chunks=len(chunks), largest_chunk=max(c.stop - c.start for c in chunks),
                group=manifest["group"], constant=tuple(constant),
                compiled_in=tuple(name for name, _ in engine.specialized_axes(constant)), finished=len(finished),
                to_run=len(_chunks_to_run(chunks, finished, shard, max_chunks)),
                disk=_disk(sweep, program, task, len(chunks)))


@_restores_x64
def run(spec: str | Path | Sweep, out: str | Path | None = None, overrides: Sequence[str] = (),
        chunk_size: int | None = None, overwrite: bool = False, progress_bar: bool | None = None,
        max_chunks: int | None = None, shard: tuple[int, int] | None = None,
        say: Callable[[str], None] | None = None, model: Any = None) -> RunReport:
    """Run every trajectory of a sweep into a Parquet dataset folder (default `runs/<name>`).
    `spec`: a TOML file, a mapping of its tables, or a resolved Sweep; `model`: a model object of
    your own (`dlsweep.Model`, its class at the top level of a .py file) in place of the spec's.

    An existing folder of the same sweep is resumed (finished chunks are skipped); one of a
    different sweep is refused unless `overwrite`. `max_chunks` stops after that many chunks
    (the rest is filled by a later call). `shard=(K, N)` runs only chunks K-1, K-1+N, ... and
    may share the folder with the other shards, on this machine or others; the first to start
    fixes the chunk plan, and the dataset is complete when every chunk's part exists.

    `say(line)` hears the run's size before anything is compiled (trajectories, trajectory-steps,
    disk) and, where no progress bar shows an ETA, one after the first chunk. A chunk size not
    used as given, and a sizeable share of diverged trajectories, are DlsweepWarnings."""
    sweep, folder, program, flat, task = _prepared(spec, out, overrides, chunk_size, max_chunks, overwrite, shard, model)
    group = chunk_group(sweep, program)
    if say is not None:
        n_chunks = len(grid.chunks(flat.size, chunk_size or engine.max_chunk(), group))
        say(size_line(folder, sweep.axes, sweep.steps, _disk(sweep, program, task, n_chunks)))

    with store.locked(folder, shard):
        manifest = store.prepare(folder, sweep, overwrite)
        if manifest is None:
            manifest = _fresh_manifest(sweep, program, flat, task, chunk_size, group)
        elif manifest.get("rebuilt"):
            warnings.warn(f"{folder / store.MANIFEST} was missing or damaged; rebuilt from the chunk records",
                          DlsweepWarning, stacklevel=2)
        manifest = store.start(folder, sweep, manifest, shard)
        group = manifest["group"]
        plan = grid.chunks(flat.size, manifest["chunk_size"], group)
        for note in chunk_size_notes(chunk_size, manifest, folder, plan, sweep.axes):
            warnings.warn(note, DlsweepWarning, stacklevel=2)
        finished = _verified_chunks(folder, manifest, plan)
        todo = _chunks_to_run(plan, finished, shard, max_chunks)
        compile_seconds, run_seconds, traj_steps = 0.0, 0.0, 0
        if todo:
            compiled = compile_sweep(sweep, program, task, manifest["chunk_size"], group)
            compile_seconds = compiled.compile_seconds
            baselines = _baselines(sweep, program, task)
            meter = progress.meter(sum(c.stop - c.start for c in todo), len(todo), progress_bar, say)
            started = time.perf_counter()
            try:
                pending = None
                for chunk in [*todo, None]:     # launch chunk i+1, then write chunk i while it computes
                    launched = None if chunk is None else compiled.launch(
                        np.arange(chunk.start, chunk.stop), flat.rows(chunk.start, chunk.stop), task)
                    if pending is not None:
                        chunk_steps = _write_chunk(folder, sweep, program, flat, pending, compiled.fetch, manifest,
                                                   baselines)
                        traj_steps += chunk_steps
                        meter.update(pending[0].stop - pending[0].start, chunk_steps)
                    pending = None if chunk is None else (chunk, launched, time.perf_counter())
            finally:
                meter.close()
            run_seconds = time.perf_counter() - started
        missing = len(plan) - len(store.finished_chunks(folder))
    outcome = _outcome(folder, sweep)
    return RunReport(folder, flat.size, len(todo), len(finished), missing, compile_seconds, run_seconds, traj_steps,
                     outcome)


def _outcome(folder: Path, sweep: Sweep) -> Outcome | None:
    """How the trajectories of the folder's finished chunks ended; a DlsweepWarning naming the
    cells where a sizeable share diverged."""
    if not store.finished_chunks(folder):
        return None
    outcome = Outcome.of(load(folder, columns=["run_id", *sweep.axes, "diverged", "converged"]), sweep.axes, sweep.steps)
    warning = outcome.warning()
    if warning:
        warnings.warn(f"{folder}: {warning}", DlsweepWarning, stacklevel=3)
    return outcome


def _baselines(sweep: Sweep, program: engine.Program, task: dict):
    """runs -> the baseline's columns for those runs (`sweep.compare`), fitted once per seed on
    the seed's data as the program draws it; None without `compare`."""
    if not sweep.compare:
        return None
    baseline = sweep.family.baseline(sweep.task)
    fitted: dict[int, object] = {}

    def columns(runs: pd.DataFrame) -> dict[str, np.ndarray]:
        seeds = runs["seed"].to_numpy() if "seed" in runs else np.zeros(len(runs), np.int64)
        out: dict[str, np.ndarray] = {}
        for seed, rows in pd.Series(range(len(runs))).groupby(seeds).groups.items():
            if int(seed) not in fitted:
                fitted[int(seed)] = baseline.fit(engine.draw_task(program, task, int(seed), sweep.seed))
            for name, values in baseline.columns(fitted[int(seed)], runs.iloc[rows]).items():
                out.setdefault(name, np.full(len(runs), np.nan))[np.asarray(rows)] = values
        return out

    return columns


def _verified_chunks(folder: Path, manifest: dict, plan: list[grid.Chunk]) -> set[int]:
    """The finished chunks whose parts match their records. A damaged chunk (a part missing,
    truncated, emptied or changed) is forgotten, so it is computed again, with a warning naming
    it; whole parts without a record (a run stopped before writing it) are adopted."""
    for index, why in store.damaged_chunks(folder).items():
        warnings.warn(f"{folder}: chunk {index} is damaged ({why}); computing it again", DlsweepWarning, stacklevel=3)
        store.forget_chunk(folder, index)
    finished = store.finished_chunks(folder)
    store.adopt_parts(folder, manifest, [c for c in plan if c.index not in finished])
    return store.finished_chunks(folder)


def _write_chunk(folder: Path, sweep: Sweep, program: engine.Program, flat: grid.Grid, pending, fetch,
                 manifest: dict, baselines=None) -> int:
    """Wait for a launched chunk, write its parts and its record; its trajectory-steps."""
    chunk, launched, launched_at = pending
    summary, records = fetch(launched)
    run_ids = np.arange(chunk.start, chunk.stop)
    hps = flat.rows(chunk.start, chunk.stop)
    runs, trajectories = store.chunk_frames(sweep, run_ids, hps, summary, records, np.asarray(program.record_steps))
    if baselines is not None:
        runs = runs.assign(**baselines(runs))
    chunk_steps = int(runs["steps_run"].sum())
    record = {"runs": [chunk.start, chunk.stop], "seconds": round(time.perf_counter() - launched_at, 4),
              "traj_steps": chunk_steps, "executed_traj_steps": int(summary["executed"]),
              "diverged": int(runs["diverged"].sum()),
              "converged": int(runs["converged"].sum()), "writer": store.writer_name(),
              "plan": store.plan_of(manifest)}
    store.write_chunk(folder, chunk.index, runs, trajectories, record)
    return chunk_steps


@_restores_x64
def thresholds(folder: str | Path, s: float = 0.05, f: float = 0.95, pairs: str | list[tuple[int, int]] = "adjacent",
               method: str = "grid", rtol: float = 1e-4, write: bool = True,
               out: str | Path | None = None) -> pd.DataFrame:
    """(s, f)-incremental thresholds in sigma0 for every pair and every cell of the other axes,
    with the theory of Gissin et al. beside them; written to `out` (default
    `DIR/thresholds.parquet`; a read-only run folder needs `out`), the path in `attrs["written_to"]`.

    `grid` reads them off the run's sigma0 axis (interpolated in ln sigma0); `bisect` refines each
    grid bracket by vectorized sub-grids in ln sigma0, every cell at once, one batched engine call
    a round, to relative width `rtol` (`_bisect` says where it searches and what it can miss).
    `reason` says why a row has no threshold; a table of a partial run folder says so in the
    column `partial` ("partial: x of y chunks", "" when complete) and in `attrs["partial"]`."""
    folder = Path(folder)
    if method not in ("grid", "bisect"):
        raise incremental.ThresholdError(f"method={method!r}: expected grid or bisect")
    if not 0 < rtol < 1:
        raise incremental.ThresholdError(f"rtol={rtol!r}: expected a number in (0, 1)")
    sweep = spec_module.load(_spec_file(folder))
    sigma_star = sweep.family.targets(sweep.task)
    if "sigma0" not in sweep.axes or sigma_star is None:
        raise incremental.ThresholdError(f"{folder}: thresholds need a sigma0 axis and targets sigma_star")
    incremental.check_levels(s, f, sweep.record.levels)
    pair_list = incremental.pairs_for(sigma_star, pairs)
    if not pair_list:
        raise incremental.ThresholdError(f"{folder}: no pair of distinct targets in sigma_star = {list(sigma_star)}")
    cells = [axis for axis in sweep.axes if axis != "sigma0"]
    decided = incremental.decisions(load(folder), pair_list, s, f)
    table = incremental.grid_thresholds(decided, cells)
    table["method"] = "grid"
    if method == "bisect":
        table = _bisect(sweep, table, decided, cells, s, f, rtol)
    targets = np.asarray(sigma_star)
    table = table.assign(r=targets[table.i] / targets[table.j], sigma_star_i=targets[table.i],
                         sigma_star_j=targets[table.j], s=s, f=f)
    first = ["i", "j", "r", "sigma_star_i", "sigma_star_j", "s", "f", *cells]
    table = table[first + [c for c in table.columns if c not in first]]
    table = _with_theory(table, sweep, cells, sigma_star, s, f)
    partial = store.partial_note(folder) or ""
    table = table.assign(partial=partial)
    table.attrs["partial"] = partial
    table.attrs["cells"] = cells
    if write:
        path = Path(out) if out is not None else folder / THRESHOLDS_FILE
        store.write_table(path, table, hint="pass out=FILE.parquet to write the table elsewhere")
        table.attrs["written_to"] = str(path)
    return table


def _with_theory(table: pd.DataFrame, sweep: Sweep, cells: list[str], sigma_star, s: float, f: float) -> pd.DataFrame:
    """Gissin et al.'s theory beside the rows whose runs follow the toy model's dynamics, with
    `toy_lr`, the toy's equivalent step (`Family.toy_lr`; NaN where they do not; left out where it
    is the run's own lr everywhere, as for the toy); unchanged where no row does, and for any
    optimizer but plain gradient descent (the theory is of GD and gradient flow)."""
    if sweep.optimizer.name != "sgd":
        return table
    family = sweep.family
    toy_lr = np.array([family.toy_lr(sweep.task, cell) for cell in table[cells].to_dict("records")], dtype=float)
    if "depth" not in table or np.isnan(toy_lr).all():
        return table
    if not np.array_equal(toy_lr, table.lr.to_numpy(float)):
        table = table.assign(toy_lr=toy_lr)
    return incremental.theory_columns(table, sigma_star, s, f, max(sigma_star))


def _bisect(sweep: Sweep, table: pd.DataFrame, decided: pd.DataFrame, cells: list[str], s: float, f: float,
            rtol: float) -> pd.DataFrame:
    """Refine every grid bracket at once to the largest incremental sigma0, to relative width
    `rtol`: each round runs `incremental.SUBGRID_POINTS` sigma0 per row, evenly spaced in
    ln sigma0 over the row's span and rounded to the sweep's dtype, as one batch through the
    engine (same steps, dtype and stop rules as the run); `incremental.refine_update` keeps the
    largest incremental point and the next non-incremental one above it as the next span.

    Where the largest incremental sigma0 is searched: under GD the incremental set can have
    islands above a non-incremental stretch (THEORY.md 2.2), and one can lie above the grid's
    bracket_hi. So the first span runs from bracket_lo (the largest incremental grid point) over
    the grid's bracket and the one above it, to the second decided grid point above bracket_lo
    (bracket_hi where there is none). An island in a span [lo, hi] wider than that round's
    sub-grid spacing, ln(hi/lo) / (SUBGRID_POINTS + 1), contains a sub-grid point and is found;
    an island narrower than the spacing can fall between two points, and one above the first span
    is seen only where it holds a grid point. `monotone` and `reason` are recomputed from every
    sigma0 evaluated, grid and sub-grid. A row whose span holds no other sigma0 of the sweep's
    dtype stops there (as narrow as the dtype allows); a round that finds nothing decided in a
    row's span ends that row as "undecided inside the bracket" (incremental.STALLED), with no
    threshold."""
    table = table.reset_index(drop=True)
    keys = [*cells, "i", "j"]
    active = (table.status == "ok").to_numpy(copy=True)
    table["rounds"] = 0
    if not active.any():
        return table
    quick = dataclasses.replace(sweep, record=dataclasses.replace(sweep.record, points=2))
    program, _, task = compile_inputs(quick)
    size = default_chunk_size(program, len(table) * incremental.SUBGRID_POINTS, list(sweep.axes), task)
    compiled = engine.compile_chunk(program, size, list(sweep.axes), task, sweep.seed,
                                    constant=grid.constant_axes(sweep.axes, follows_leading=False))
    level = {name: k for k, name in enumerate(store.level_name(v) for v in sweep.record.levels)}

    def statuses(rows: np.ndarray, sigma0: np.ndarray) -> np.ndarray:
        """Definition 1 at sigma0 (n, P) on the cells and pairs of table rows `rows` (n,)."""
        flat = np.repeat(rows, sigma0.shape[1])
        hps = {axis: table[axis].to_numpy()[flat] for axis in cells} | {"sigma0": sigma0.ravel()}
        hps = {axis: hps[axis] for axis in sweep.axes}
        parts = [compiled(flat[c.start:c.stop], {k: v[c.start:c.stop] for k, v in hps.items()}, task)[0]
                 for c in grid.chunks(len(flat), size)]
        hits = np.concatenate([p["hit"] for p in parts])
        at = np.arange(len(flat))
        status = incremental.decide(hits[at, table.i.to_numpy()[flat], level[store.level_name(f)]],
                                    hits[at, table.j.to_numpy()[flat], level[store.level_name(s)]],
                                    np.concatenate([p["diverged"] for p in parts]))
        return status.reshape(sigma0.shape)

    lo, hi = table.bracket_lo.to_numpy(float).copy(), table.bracket_hi.to_numpy(float).copy()
    span_hi = _second_decided_above(table, decided, keys)
    evaluated = []
    while True:
        rows = np.nonzero(active & (span_hi / np.where(active, lo, 1.0) - 1 > rtol))[0]
        if not len(rows):
            break
        points = incremental.subgrid(lo[rows], span_hi[rows], incremental.SUBGRID_POINTS)
        points = points.astype(sweep.dtype).astype(float)                 # the sigma0 the engine runs
        inside = (points > lo[rows, None]) & (points < span_hi[rows, None])
        narrow = ~inside.any(axis=1)                                      # as narrow as the dtype allows
        active[rows[narrow]] = False
        rows, points, inside = rows[~narrow], points[~narrow], inside[~narrow]
        if not len(rows):
            continue
        status = np.where(inside, statuses(rows, points), incremental.UNDECIDED)
        evaluated.append(table.loc[np.repeat(rows, points.shape[1]), keys]
                         .assign(sigma0=points.ravel(), status=status.ravel())[inside.ravel()])
        known = np.stack([hi[rows], span_hi[rows]], axis=1)              # non-incremental upper ends
        new_lo, new_hi = incremental.refine_update(
            lo[rows], np.concatenate([points, known], axis=1),
            np.concatenate([status, np.full(known.shape, incremental.NOT_INCREMENTAL)], axis=1))
        stalled = rows[(new_lo == lo[rows]) & (new_hi == span_hi[rows])]
        lo[rows], hi[rows], span_hi[rows] = new_lo, new_hi, new_hi
        table.loc[stalled, "status"] = incremental.STALLED
        active[stalled] = False
        table.loc[rows, "rounds"] += 1
    done = (table.status == "ok").to_numpy()
    table.loc[done, "sigma0_th"] = lo[done]
    table.loc[(table.rounds > 0) & ~done, "sigma0_th"] = np.nan        # stalled: no threshold claimed
    table["bracket_lo"], table["bracket_hi"] = lo, hi
    table["method"] = "bisect"
    points = pd.concat([decided[[*keys, "sigma0", "status"]], *evaluated], ignore_index=True)
    return incremental.judge(table, points, cells)


def _second_decided_above(table: pd.DataFrame, decided: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Per thresholds row, the second decided grid sigma0 above bracket_lo (the top of the grid
    bracket above its own), or bracket_hi where there is none."""
    known = decided[decided.status.isin([incremental.INCREMENTAL, incremental.NOT_INCREMENTAL])]
    merged = table[keys + ["bracket_hi"]].reset_index().merge(known[[*keys, "sigma0"]], on=keys, how="left")
    above = merged[merged.sigma0 > merged.bracket_hi].groupby("index").sigma0.min()
    return np.array(above.reindex(table.index).fillna(table.bracket_hi), dtype=float)


PC_CURVES = (0, 1, 3, 7, 15, 31)     # the principal directions a pc_curves figure shows (0-based)
OBSERVABLES = ("nuclear_norm", "reconstruction_error")     # the default panels of an observables figure


RATE_WINDOW = 0.1      # pc_rates fits ln distance while it is above this fraction of its largest value


@_restores_x64
def pc_rates(folder: str | Path, at: dict[str, float] | None = None) -> pd.DataFrame:
    """Measured convergence rates along the data's principal directions, beside Hacohen &
    Weinshall's prediction (eq. 10): for every run, the slope of ln pc_distance_j against the step
    (`theory.fit_pc_rates`), with lambda_j the
    eigenvalues of its seed's Sigma_x (as the program drew it; 1 or 0 once whitened). One row per
    (depth, lr, j) with the mean `rate` and `rate_std` over seeds, `eigenvalue` and `predicted` =
    -ln|1 - lr N lambda_j|, for the runs that did not diverge at the first value of every other
    axis; directions outside the support of Sigma_x (no gradient reaches them) are left out. The
    fit covers the decay to RATE_WINDOW of the largest distance: the prediction assumes the
    layers' gradient scale matrices at the identity, as at the init, and deeper networks leave it.
    `at` (e.g. {"depth": 2}) keeps the runs at those axis values."""
    from dlsweep.analysis import theory

    folder = Path(folder)
    sweep = spec_module.load(_spec_file(folder))
    _check_at(sweep, at)
    runs, traj = _only(load(folder), at), load_trajectories(folder)
    columns = store.vector_columns(traj, "pc_distance")
    if not columns or "depth" not in runs:
        raise incremental.ThresholdError(f"{folder}: per-PC rates need a depth axis and pc_distance columns (linear_net)")
    program, _, task = compile_inputs(sweep)
    eigenvalues = {}
    rows = []
    for _, run in _first_slice(runs[~runs.diverged], [a for a in sweep.axes if a not in ("depth", "lr", "seed")]).iterrows():
        seed = int(run.get("seed", 0))
        if seed not in eigenvalues:
            eigenvalues[seed] = np.linalg.eigvalsh(engine.draw_task(program, task, seed, sweep.seed)["sigma_x"])[::-1]
        path = traj[traj.run_id == run.run_id]
        rates = theory.fit_pc_rates(path["step"].to_numpy(), path[columns].to_numpy(), floor=RATE_WINDOW)
        predicted, _ = theory.predicted_pc_rates(eigenvalues[seed], run.lr, run.depth)
        rows.append(pd.DataFrame({"depth": run.depth, "lr": run.lr, "seed": seed, "j": np.arange(len(columns)),
                                  "eigenvalue": eigenvalues[seed], "rate": rates, "predicted": predicted}))
    if not rows:
        raise incremental.ThresholdError(f"{folder}: every run diverged; no rates to measure")
    table = pd.concat(rows, ignore_index=True)
    table = table[table.eigenvalue > linear_net.SUPPORT_RTOL * table.groupby("seed").eigenvalue.transform("max")]
    return (table.groupby(["depth", "lr", "j"], as_index=False)
            .agg(eigenvalue=("eigenvalue", "mean"), rate=("rate", "mean"), rate_std=("rate", "std"),
                 predicted=("predicted", "mean")))


@_restores_x64
def plot_run(folder: str | Path, kind: str = "heatmap", x: str | None = None, y: str | None = None,
             color: str | None = None, pair: tuple[int, int] | None = None, s: float = 0.05, f: float = 0.95,
             out: str | Path | None = None, title: str | None = None, at: dict[str, float] | None = None) -> list[Path]:
    """Draw one figure of a run folder; it lands in `DIR/figures/<kind>[...].png` and at `out`.
    Its heading is `title` (if given) over what the figure holds fixed (`figure_slice`: the axes
    it does not draw, at the value it takes, steps, dtype, (s, f)) and, for a partial run, "partial:
    x of y chunks". Returns the paths written (the run folder's copy left out, with a warning,
    where the folder cannot take it and `out` did).

    heatmap: x (default sigma0) by y (default depth), colour `status` of `pair` (default the two
    largest targets) or a numeric column (`log_hit_ratio`, `final_loss`, ...), with the measured
    threshold, gf_exact and the Theorem 2 band over it (where the runs follow the toy model's
    dynamics); over a seed axis, by default the share of seeds that learn incrementally, with the
    median threshold and its range; x by y = r by depth with colour
    `log10_sigma0_th` maps the thresholds themselves. trajectories: sigma_i(t) faceted by sigma0 x
    depth (repetitions over seeds as mean and spread). thresholds: sigma0_th against r per depth;
    with x an axis (e.g. depth), sigma0_th of `pair` against it, one line per value of the axis
    `color` (e.g. momentum), with gradient flow's exact threshold against depth.
    lr: sigma0_th against lr at N = 2. correlation: the final predictor's correlation with the
    labelling vector against depth (models that summarize one), with the SVM baseline if run.
    agreement: the agreement of the selected features with OMP's against the sparsity.
    observables: recorded quantities (y: comma-separated columns of the trajectories table, default
    nuclear_norm,reconstruction_error) against the step, one line per value of x (default depth),
    the other axes at their first value. pcs: the distance to the optimum along each principal
    direction of the data at a few steps, mean and std over seeds (linear_net). pc_rates: the
    measured convergence rate along each direction, with the prediction.
    pc_curves: the distance along a few principal directions against the step, with eq. 10's
    prediction, at the smallest depth and lr. summary: a runs column (y, default population_error)
    against an axis (x, default sigma0; `c` = 2 sigma0 (1 + s^2)/(1 - s^2), Azulay's one number of a
    depth-2 init), one line per value of `color` (default shape), mean and std over seeds; for
    diagonal_net with the interpolators' population errors as levels. heatmap with `color` a runs
    column (population_error, l1_l2_position, ...): its mean over seeds over two axes (default
    sigma0 x shape), for diagonal_net at depth 2 with the theory's regime boundary. `at` picks one
    value of other axes (e.g. {"depth": 3}) before the figure takes the first of the rest."""
    from dlsweep import plot

    folder = Path(folder)
    if kind not in PLOT_KINDS:
        raise plot.PlotError(f"kind={kind!r}: expected one of {', '.join(PLOT_KINDS)}")
    if out is not None and Path(out).suffix.lower() not in FIGURE_SUFFIXES:
        raise plot.PlotError(f"out={str(out)!r}: expected a file ending in {', '.join(FIGURE_SUFFIXES)}")
    sweep = spec_module.load(_spec_file(folder))
    sigma_star = sweep.family.targets(sweep.task)
    _check_at(sweep, at)
    runs = _only(load(folder), at)
    column_heatmap = kind == "heatmap" and color is not None and color in runs.columns and color not in sweep.axes
    if sigma_star is None and kind in NEEDS_TARGETS and not column_heatmap:
        raise plot.PlotError(f"{folder}: a {kind} figure needs targets sigma_star, which this task has not")
    if sigma_star is not None and pair is None:
        adjacent = incremental.pairs_for(sigma_star, "adjacent")
        if not adjacent and kind in NEEDS_TARGETS:
            raise plot.PlotError(f"{folder}: a {kind} figure needs two distinct targets, got sigma_star = {list(sigma_star)}")
        pair = adjacent[0] if adjacent else None
    elif sigma_star is not None:
        incremental.pairs_for(sigma_star, [pair])
    at_name = "".join(f"-{axis}{value:g}" for axis, value in (at or {}).items())    # a figure of a slice: its own file
    name = kind + at_name
    if kind == "trajectories":
        facets = [a for a in (x or "depth", y or "sigma0") if a in sweep.axes] or [a for a in sweep.axes if a != "seed"][:1]
        cols, rows = _two_axes(sweep, *facets) if len(facets) == 2 else (facets[0], None)
        chosen = runs[runs[cols].isin(_spread(runs[cols].unique(), 6))]
        if rows:
            chosen = chosen[chosen[rows].isin(_spread(runs[rows].unique(), 3))]
        chosen, heading = figure_slice(chosen, sweep, (rows, cols), title, folder)
        traj = load_trajectories(folder)
        figure = plot.trajectories(traj[traj.run_id.isin(chosen.run_id)], chosen, sigma_star, rows=rows,
                                   cols=cols, s=s, f=f, pair=pair, ylabel=sweep.family.observed,
                                   title=heading)
    elif kind == "correlation":
        if "correlation" not in runs or "depth" not in runs:
            raise plot.PlotError(f"{folder}: the correlation figure needs a depth axis and a model that "
                                 f"summarizes its correlation with w* (diagonal, conv)")
        baseline = "svm_correlation" if "svm_correlation" in runs else None
        chosen, heading = figure_slice(runs, sweep, ("depth", "sigma0"), title, folder)
        figure = plot.correlation_by_depth(chosen, baseline, title=heading)
    elif kind == "agreement":
        if "omp_agreement" not in runs or "sparsity" not in runs:
            raise plot.PlotError(f"{folder}: the agreement figure needs a sparsity axis and the OMP baseline "
                                 f"(model diagonal with select > 0 and compare = true)")
        chosen, heading = figure_slice(runs, sweep, ("sparsity", "depth", "sigma0"), title, folder)
        figure = plot.agreement_by_sparsity(chosen, title=heading)
    elif kind == "observables":
        traj = load_trajectories(folder)
        columns = y.split(",") if y else [c for c in OBSERVABLES if c in traj]
        missing = [c for c in columns if c not in traj] or ([] if columns else list(OBSERVABLES))
        if missing:
            raise plot.PlotError(f"{folder}: no recorded {', '.join(missing)}; the trajectories table has "
                                 f"{', '.join(c for c in traj.columns if c not in ('run_id', 'step'))}")
        hue = _axis_of(sweep, x or "depth")
        chosen, heading = figure_slice(runs, sweep, hue, title, folder)
        figure = plot.observables(traj[traj.run_id.isin(chosen.run_id)], chosen, columns, hue=hue, title=heading)
    elif kind == "pcs":
        if not store.vector_columns(load_trajectories(folder), "pc_distance"):
            raise plot.PlotError(f"{folder}: the pcs figure needs pc_distance columns (model linear_net)")
        hue = _axis_of(sweep, x or "depth")
        _, heading = figure_slice(runs[~runs.diverged], sweep, hue, title, folder)
        spread = _only(pc_spread(folder), at)
        figure = plot.pc_profile(_first_slice(spread, [a for a in sweep.axes if a not in (hue, "seed")]), hue=hue, title=heading)
    elif kind == "pc_curves":
        rates = pc_rates(folder, at)
        depth, lr = rates.depth.min(), rates.lr.min()
        rates = rates[(rates.depth == depth) & (rates.lr == lr)].set_index("j")
        directions = [j for j in PC_CURVES if j in rates.index]
        chosen, heading = figure_slice(runs[~runs.diverged], sweep, None, title, folder)
        traj = load_trajectories(folder)
        figure = plot.pc_curves(traj[traj.run_id.isin(chosen.run_id)], chosen, directions,
                                {j: np.exp(-rates.predicted[j]) for j in directions}, title=heading)
    elif kind == "pc_rates":
        chosen, heading = figure_slice(runs[~runs.diverged], sweep, "depth", title, folder)
        rates = pc_rates(folder, at).dropna(subset=["rate"])
        figure = plot.pc_rates(rates[rates.lr == chosen.lr.iloc[0]], title=heading)
    elif kind == "summary":
        column, hue = y or "population_error", color or ("shape" if "shape" in sweep.axes else "depth")
        _numeric_column(runs, column, sweep, "y")
        _axis_of(sweep, hue, "color")
        frame = runs[~runs.diverged]
        across = x or "sigma0"
        if across == "c":
            frame = _with_c(frame, folder)
        else:
            _axis_of(sweep, across)
        frame, heading = figure_slice(frame, sweep, ("sigma0" if across == "c" else across, hue), title, folder)
        levels, curve = {}, None
        cs = np.geomspace(frame.c.min(), frame.c.max(), 49) if across == "c" else np.zeros(0)
        theory_of_c = _theory_of_c(sweep, column, cs)
        if theory_of_c is not None:
            values, rich, kernel = theory_of_c
            levels = {"min-l1 interpolator": rich, "min-l2 interpolator": kernel}
            curve = (cs, values, r"theory: argmin $Q_c$ (Theorem 1)") if across == "c" else None
        figure = plot.summary_lines(frame, across, column, hue, levels, curve, title=heading)
        name = f"{kind}-{column}-{across}{at_name}"
    elif column_heatmap:
        x, y = _two_axes(sweep, x or "sigma0", y or ("shape" if "shape" in sweep.axes else "depth"))
        _numeric_column(runs, color, sweep, "color")
        frame, heading = figure_slice(runs[~runs.diverged], sweep, (x, y), title, folder,
                                      seeds="mean over {} seeds")
        depth_two = (x, y) == ("sigma0", "shape") and "depth" in frame and (frame.depth == 2).all()
        boundary = _q_boundary(sweep, frame["shape"].abs().max(), color) if depth_two else None
        figure = plot.heatmap(frame.groupby([x, y], as_index=False)[color].mean(), x, y, color, title=heading,
                              boundary=boundary)
        name = f"heatmap-{x}-{y}-{color}{at_name}"
    elif kind == "heatmap" and (x, y) == ("r", "depth"):
        table = _thresholds_for(folder, s, f, "all", at).assign(
            log10_threshold_over_target=lambda t: np.log10(t.sigma0_th / t.sigma_star_j))
        table, heading = figure_slice(table[table.i == pair[0]], sweep, ("sigma0", "depth"),
                                      title or f"threshold against r (values below {sigma_star[pair[0]]:g})",
                                      folder, levels=(s, f), seeds=None)
        figure = plot.heatmap(table, "r", "depth", color or "log10_threshold_over_target", title=heading)
        name = f"heatmap-r-depth{at_name}"
    elif kind == "heatmap":
        x, y = _two_axes(sweep, x or "sigma0", y or ("depth" if "depth" in sweep.axes else "lr"))
        incremental.check_levels(s, f, sweep.record.levels)
        frame = plot.decisions_frame(runs, pair, s, f)
        if color is not None and color not in frame:
            numeric = [c for c in frame.columns if frame[c].dtype.kind in "fi" and c not in sweep.axes]
            raise plot.PlotError(f"color={color!r}: expected status or a numeric column: {', '.join(numeric)}")
        seeds = color is None and "seed" in sweep.axes and "seed" not in (x, y)    # colour: the share of seeds
        heading = (f"pair ({pair[0]}, {pair[1]}): $\\sigma^*$ = {sigma_star[pair[0]]:g} vs {sigma_star[pair[1]]:g}")
        frame, heading = figure_slice(frame, sweep, (x, y), f"{title}\n{heading}" if title else heading, folder,
                                      levels=(s, f), seeds="share of {} seeds" if seeds else None)
        table = _thresholds_for(folder, s, f, [pair], at)
        table = _first_slice(table[(table.i == pair[0]) & (table.j == pair[1])],
                             [a for a in sweep.axes if a not in (x, y) and not (seeds and a == "seed")])
        if seeds:
            frame = incremental.over_seeds(frame, [x, y])
            table = incremental.thresholds_over_seeds(table, [y])
        figure = plot.heatmap(frame, x, y, "incremental_fraction" if seeds else color or "status",
                              thresholds=table if x == "sigma0" else None, title=heading)
        name = f"heatmap-{x}-{y}{at_name}"
    elif kind == "thresholds" and x not in (None, "r"):
        figure = _threshold_lines(folder, sweep, _axis_of(sweep, x), color, pair, s, f, at, title)
        name = f"thresholds-{x}-{color}{at_name}"
    elif kind == "thresholds":
        table, heading = figure_slice(_thresholds_for(folder, s, f, None, at), sweep, ("sigma0", "depth"),
                                      title, folder)      # the figure's heading names (s, f)
        figure = plot.threshold_curves(_with_thresholds(table, folder), title=heading)
    else:
        table = _thresholds_for(folder, s, f, None, at)
        if not (table.depth == 2).any() or "lr" not in table or table.lr.nunique() < 2:
            raise plot.PlotError(f"{folder}: the lr figure needs depth 2 and several learning rates")
        if "thm3_upper" not in table:
            raise plot.PlotError(f"{folder}: the lr figure draws Theorem 3's bounds, which hold for gradient descent on "
                                 f"the toy model's dynamics; this sweep's runs do not follow them (optimizer "
                                 f"{sweep.optimizer.name!r}, model {sweep.model!r})")
        table, heading = figure_slice(table[table.depth == 2], sweep, ("sigma0", "lr", "depth"), title, folder,
                                      levels=(s, f))
        figure = plot.lr_map(_with_thresholds(table, folder), title=heading)
    return _save_figure(figure, folder / "figures" / f"{name}.png", out)


def _threshold_lines(folder: Path, sweep: Sweep, x: str, color: str | None, pair: tuple[int, int], s: float, f: float,
                     at: dict[str, float] | None, title: str | None):
    """The threshold sigma0_th of `pair` against the axis `x`, one line per value of `color` (an
    axis; default the last other one, seeds aside), mean and spread over seeds; against depth with
    the exact gradient-flow threshold (Gissin et al. Theorem 1 via `theory.log_gf_threshold`) where
    the optimizer's small steps follow gradient flow."""
    from dlsweep import plot
    from dlsweep.analysis import theory

    others = [a for a in sweep.axes if a not in ("sigma0", x, "seed")]
    if color is None and not others:
        raise plot.PlotError(f"{folder}: a thresholds figure against {x} draws one line per value of another axis "
                             f"(color=...), and the sweep has none but sigma0 and {x}")
    hue = _axis_of(sweep, color or others[-1], "color")
    table = _thresholds_for(folder, s, f, [pair], at)
    table = _with_thresholds(table[(table.i == pair[0]) & (table.j == pair[1])], folder)
    table, heading = figure_slice(table, sweep, ("sigma0", x, hue), title, folder, levels=(s, f))
    targets = table.sigma_star_i.iloc[0], table.sigma_star_j.iloc[0]
    heading += f"\npair ({pair[0]}, {pair[1]}): $\\sigma^*$ = {targets[0]:g} vs {targets[1]:g}"
    curve = None
    if x == "depth" and sweep.optimizer.kind.flow_limit:
        depths = np.sort(table.depth.unique())
        curve = (depths, np.exp([theory.log_gf_threshold(*targets, s, f, float(n)) for n in depths]),
                 "gradient flow (exact)")
    return plot.summary_lines(table, x, "sigma0_th", hue, curve=curve, title=heading, log_y=True)


def _with_thresholds(table: pd.DataFrame, folder: Path) -> pd.DataFrame:
    """The rows of a thresholds table with a threshold (status ok), or a PlotError saying why
    there are none."""
    from dlsweep import plot

    found = table[table.status == "ok"]
    if found.empty:
        statuses = ", ".join(f"{count} {status}" for status, count in table.status.value_counts().items())
        raise plot.PlotError(f"{folder}: no threshold to draw ({statuses or 'no cells'})"
                             + "".join(f"; {note}" for note in [store.partial_note(folder)] if note))
    return found


def _save_figure(figure, default: Path, out: str | Path | None) -> list[Path]:
    """Write a figure to `out` (if given) and to its place in the run folder; the paths written.
    Where the run folder cannot take it (read-only) and `out` can, that is a warning, not an error."""
    from dlsweep import plot

    paths = []
    try:
        if out is not None:
            plot.save(figure, [Path(out)], keep_open=True)
            paths.append(Path(out))
        try:
            plot.save(figure, [default], keep_open=True)
            paths.insert(0, default)
        except plot.PlotError as err:
            if out is None:
                raise plot.PlotError(f"{err}; give out=... to write the figure elsewhere") from None
            warnings.warn(f"{err}; the figure is only at {out}", DlsweepWarning, stacklevel=3)
    finally:
        plot.close(figure)
    return paths


def _two_axes(sweep: Sweep, x: str, y: str) -> tuple[str, str]:
    """Two different axes of the run, for a figure's x and y (or columns and rows)."""
    from dlsweep.plot import PlotError

    for option, axis in (("x", x), ("y", y)):
        if axis not in sweep.axes:
            raise PlotError(f"{option}={axis!r}: not an axis of this run ({', '.join(sweep.axes)})")
    if x == y:
        raise PlotError(f"x={x!r} and y={y!r}: a figure needs two different axes")
    return x, y


@_restores_x64
def pc_spread(folder: str | Path) -> pd.DataFrame:
    """The spread over networks of the distance to the optimum along each principal direction
    (Hacohen & Weinshall, Figure 4's std over networks): per cell of the axes other than `seed`,
    recorded step and direction j, the `mean`, standard deviation `std` (ddof 1; NaN for one seed)
    and count `seeds` of pc_distance_j over the seeds' runs that did not diverge (a run that
    converged early stops counting after its last recorded step)."""
    folder = Path(folder)
    sweep = spec_module.load(_spec_file(folder))
    runs, traj = load(folder), load_trajectories(folder)
    columns = store.vector_columns(traj, "pc_distance")
    if not columns:
        raise incremental.ThresholdError(f"{folder}: the per-PC spread needs pc_distance columns (model linear_net)")
    cells = [a for a in sweep.axes if a != "seed"]
    data = traj[["run_id", "step", *columns]].merge(runs.loc[~runs.diverged, ["run_id", *cells]], on="run_id")
    distances = data.melt(id_vars=[*cells, "step"], value_vars=columns, var_name="j", value_name="distance")
    distances["j"] = distances.j.str.rsplit("_", n=1).str[1].astype(int)
    return (distances.groupby([*cells, "step", "j"], as_index=False)
            .agg(mean=("distance", "mean"), std=("distance", "std"), seeds=("distance", "size")))


def _check_at(sweep: Sweep, at: dict[str, float] | None) -> None:
    """A PlotError naming an axis or a value of `at` that the sweep does not have."""
    from dlsweep.plot import PlotError

    for axis, value in (at or {}).items():
        if axis not in sweep.axes:
            raise PlotError(f"at={{{axis!r}: {value:g}}}: {axis!r} is not an axis of the sweep: {', '.join(sweep.axes)}")
        if not np.isclose(sweep.axes[axis], value, rtol=1e-12, atol=0).any():
            raise PlotError(f"at={{{axis!r}: {value:g}}}: not a value of the axis: "
                            f"{', '.join(f'{v:g}' for v in sweep.axes[axis])}")


def _only(frame: pd.DataFrame, at: dict[str, float] | None) -> pd.DataFrame:
    """The rows of a runs or derived table at the values `at` gives for the axes it has."""
    for axis, value in (at or {}).items():
        if axis in frame:
            frame = frame[np.isclose(frame[axis], value, rtol=1e-12, atol=0)]
    return frame


def _numeric_column(runs: pd.DataFrame, column: str, sweep: Sweep, option: str) -> None:
    """A PlotError naming the numeric runs columns unless `column` is one of them."""
    from dlsweep.plot import PlotError

    numeric = [c for c in runs.columns if runs[c].dtype.kind == "f" and c not in sweep.axes]
    if column not in numeric:
        raise PlotError(f"{option}={column!r}: expected a numeric column of the runs table: {', '.join(numeric)}")


def _with_c(runs: pd.DataFrame, folder: Path) -> pd.DataFrame:
    """The depth-2 runs with c = 2 sigma0 (1 + s^2)/(1 - s^2) (`theory.azulay_c`)."""
    from dlsweep.analysis import theory
    from dlsweep.plot import PlotError

    runs = runs[runs.depth == 2] if "depth" in runs else runs
    if runs.empty:
        raise PlotError(f"{folder}: x='c' is the init's c of a depth-2 network; the run has no depth 2")
    shape = runs["shape"].abs() if "shape" in runs else 0.0
    return runs.assign(c=theory.azulay_c(runs.sigma0.to_numpy(), shape))


BOUNDARY_C = np.geomspace(1e-10, 1e6, 49)      # where _q_boundary looks for c*


def _theory_of_c(sweep: Sweep, column: str, cs) -> tuple[np.ndarray, float, float] | None:
    """The family's theory of the runs column `column` against c (`Family.theory_of_c`: its
    values at `cs`, at the min-l1 and at the min-l2 interpolator) on the sweep's data, each seed's
    drawn as the run draws it, with its interpolators; None where the family has none."""
    curves = sweep.family.theory_of_c(sweep.task, column)
    if curves is None:
        return None
    program, _, task = compile_inputs(sweep)
    seeds = [compare.fit_interpolators(engine.draw_task(program, task, int(seed), sweep.seed))
             for seed in np.asarray(sweep.axes.get("seed", [0]))]
    return curves(program.model, seeds, cs)


def _q_boundary(sweep: Sweep, max_shape: float, column: str) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Azulay's regime boundary on the (sigma0, shape) plane for a heatmap of `column`, from the
    theory alone (`_theory_of_c` over BOUNDARY_C): c* where the theory's `column` is halfway between
    its rich and kernel limits (interpolated in ln c), drawn as the curve sigma0 = c* (1 - s^2) /
    (2 (1 + s^2)) for s in [0, max_shape]. Returns (sigma0s, shapes, label), or None where the
    family has no theory of the column."""
    theory_of_c = _theory_of_c(sweep, column, BOUNDARY_C)
    if theory_of_c is None:
        return None
    values, rich, kernel = theory_of_c
    progress = np.maximum.accumulate((values - rich) / (kernel - rich))      # rich limit 0 .. kernel's 1
    c_star = float(np.exp(np.interp(0.5, progress, np.log(BOUNDARY_C))))
    shapes = np.linspace(0.0, max_shape, 200)
    return c_star * (1 - shapes**2) / (2 * (1 + shapes**2)), shapes, rf"theory: halfway, $c^*$ = {c_star:.2g}"


def _axis_of(sweep: Sweep, name: str, option: str = "x") -> str:
    """`name` if it is an axis of the sweep, else a PlotError naming the option and the axes."""
    from dlsweep.plot import PlotError

    if name not in sweep.axes:
        raise PlotError(f"{option}={name!r}: expected an axis of the sweep: {', '.join(sweep.axes)}")
    return name


def figure_slice(frame: pd.DataFrame, sweep: Sweep, drawn: str | tuple[str | None, ...] | None,
                 title: str | None, folder: Path, levels: tuple[float, float] | None = None,
                 seeds: str | None = "{} seeds") -> tuple[pd.DataFrame, str]:
    """The rows of a runs or derived table at the first value of every axis but those `drawn` and
    `seed` (and `seed` too where `seeds` is None), and the figure's heading, so that it stands
    alone: the `title` (if any), then what the figure holds fixed: those axes' values, the seeds
    (`seeds` with their count, where the figure takes all of them), steps, dtype and (s, f)
    (`levels`, where they matter); then "partial: x of y chunks" for a run folder not yet complete."""
    from dlsweep.plot import PlotError, facet_title

    drawn = drawn if isinstance(drawn, tuple) else (drawn,)
    others = [a for a in sweep.axes if a not in drawn and (a != "seed" or seeds is None)]
    chosen = _first_slice(frame, others)
    if chosen.empty:
        raise PlotError(f"{folder}: every run diverged or was undecided; nothing to draw")
    fixed = [facet_title(a, chosen[a].iloc[0]) for a in others if a in chosen]
    if "seed" in sweep.axes and "seed" not in others and "seed" not in drawn:
        fixed.append(seeds.format(len(sweep.axes["seed"])))
    fixed += [f"{sweep.steps:,} steps", sweep.dtype] + ([f"(s, f) = ({levels[0]:g}, {levels[1]:g})"] if levels else [])
    lines = [title] if title else []
    return chosen, "\n".join([*lines, ", ".join(fixed), *filter(None, [store.partial_note(folder)])])


def _first_slice(frame: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """The rows at the first (smallest) value of each of `axes` present in the frame."""
    for axis in axes:
        if axis in frame:
            frame = frame[frame[axis] == frame[axis].min()]
    return frame


def _spec_file(folder: Path) -> Path:
    spec_file = folder / store.SPEC_FILE
    if not spec_file.exists():
        raise store.StoreError(f"{folder}: no {store.SPEC_FILE}; not a dlsweep run folder")
    return spec_file


def _thresholds_for(folder: Path, s: float, f: float, pairs, at: dict[str, float] | None = None) -> pd.DataFrame:
    """The folder's thresholds.parquet when it matches (s, f), holds the pairs and was computed
    from the chunks finished now (its `partial` note is the folder's), else grid thresholds computed
    now (not written); the rows at the axis values `at`."""
    path = folder / THRESHOLDS_FILE
    if path.exists():
        table = pd.read_parquet(path)
        if (len(table) and {"s", "f", "sigma_star_j", "partial"} <= set(table) and table.s.iloc[0] == s
                and table.f.iloc[0] == f and table.partial.iloc[0] == (store.partial_note(folder) or "")):
            if pairs in (None, "all") or set(map(tuple, pairs)) <= set(zip(table.i, table.j)):
                return _only(table, at)
    return _only(thresholds(folder, s=s, f=f, pairs=pairs or "adjacent", method="grid", write=False), at)


def _spread(values, count: int) -> list:
    """Up to `count` values spread evenly over the sorted unique values."""
    values = np.sort(np.unique(values))
    return list(values[np.unique(np.linspace(0, len(values) - 1, min(count, len(values))).round().astype(int))])


def show(folder: str | Path) -> dict:
    """A summary of a finished or partial run folder: what is finished, what is missing or
    damaged (a part that no longer matches its chunk's record), and the outcome of the runs."""
    folder = Path(folder)
    manifest = store.read_manifest(folder)
    if manifest is None:
        raise store.StoreError(f"{folder}: no {store.MANIFEST}; not a dlsweep run folder")
    damaged = store.damaged_chunks(folder)
    finished = store.finished_chunks(folder) - set(damaged)
    plan = grid.chunks(manifest["n_runs"], manifest["chunk_size"], manifest["group"])
    missing = [c.index for c in plan if c.index not in finished]
    summary = {
        "folder": str(folder),
        "name": manifest["name"],
        "model": manifest["model"],
        "spec_hash": manifest["spec_hash"],
        "status": "complete" if not missing else f"partial: {len(finished)} of {manifest['n_chunks']} chunks",
        "runs": f"{sum(c.stop - c.start for c in plan if c.index in finished)} of {manifest['n_runs']}",
        "chunks": f"{len(finished)} of {manifest['n_chunks']} finished (chunk size {manifest['chunk_size']})",
        "missing_chunks": missing,
        "damaged_chunks": [f"{index} ({why})" for index, why in damaged.items()],
        "backend": f"{manifest.get('backend')} {manifest.get('devices')}",
        "versions": manifest.get("versions"),
        "created": manifest.get("created"),
    }
    if manifest.get("rebuilt"):
        summary["manifest"] = f"{store.MANIFEST} missing or damaged; read from the chunk records"
    if damaged:
        summary["to_do"] = f"{store.RESUME.replace('DIR', str(folder))}: it computes the damaged chunks again"
    if finished:
        runs = load(folder, chunks=finished)
        summary["diverged"] = int(runs["diverged"].sum())
        summary["converged"] = int(runs["converged"].sum())
        summary["steps_run"] = (f"min {runs['steps_run'].min()}, median {int(runs['steps_run'].median())}, "
                                f"max {runs['steps_run'].max()}")
        summary["columns"] = list(runs.columns)
    return summary


def list_models() -> pd.DataFrame:
    """The model families with their axes (the optional ones, the seed and the optimizer's
    hyperparameters in parentheses) and task keys."""
    return pd.DataFrame([
        {"model": f.name, "axes": ", ".join(f.axes) + f" (+ {', '.join([*f.optional_axes, 'seed'])}; an optimizer's "
                                                      f"{', '.join(optimizers.HYPERPARAMETERS)})",
         "task": ", ".join(f.task_keys), "summary": f.summary}
        for f in models.FAMILIES.values()
    ])
