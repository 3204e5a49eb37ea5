"""Running a sweep: spec -> grid -> compiled chunk programs -> the Parquet dataset folder
(`run`, `plan_run`), and what a folder holds (`show`) and which families there are
(`list_models`)."""

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
from dlsweep.plan import Columns, Disk, Outcome, Plan, chunk_size_notes, diverged_where, grid_too_large, size_line
from dlsweep.spec import Sweep
from dlsweep.store import load
from dlsweep.warning import DlsweepWarning


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
    compute restore the caller's mode when they return: `restores_x64`)."""
    if dtype == "float64":
        import jax

        jax.config.update("jax_enable_x64", True)


def restores_x64(verb):
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
    chosen from the cost of its step and its stop rule (`engine.with_layout`)."""
    program, task = draw_inputs(sweep)
    program = engine.with_layout(program, list(sweep.axes), task, sweep.n_runs)
    return program, grid.build(sweep.axes), task


def draw_inputs(sweep: Sweep) -> tuple[engine.Program, dict]:
    """The program and shared task with which `engine.draw_task` draws a seed's data as the run
    does (x64 switched on first for float64 sweeps), its layout not chosen: the layout draws
    nothing differently, and choosing it lowers the step (0.15-0.2 s for a linear network)."""
    _use_dtype(sweep.dtype)
    family = sweep.family
    task = family.make_task(sweep)
    return engine.Program.from_sweep(sweep, family.build(sweep)), task


def default_chunk_size(program: engine.Program, n_runs: int, hp_names: list[str], task: dict, cycle: int = 1,
                       small: int | None = None, by_memory: bool = True) -> int:
    """Chunk size for `n_runs` trajectories from XLA's memory analysis of the chunk program, within
    the memory budget and the backend's useful maximum for its state (`engine.max_chunk`: on CPU,
    the states of a chunk stay in cache, each device's share in its core's where the chunk is
    dealt, `engine.chunk_devices`) or, one by one, for its work (`engine.max_sequential_chunk`:
    minutes of a core), whole smallest batches of the program
    (`cycle` seeds of a per-seed layout), then the batch compiled for it (`engine.compiled_batch`),
    so only the last chunk of a group has fillers. A grid no larger than the analysis's probe
    batch, or one whose largest chunk stays far below the budget by a bound found without
    compiling (`engine.rough_bytes`), is cut by the maximum alone: the program is compiled once.
    A small sweep (`engine.small_sweep_batch`) is one chunk of its `small` runs. `by_memory=False`
    cuts by the maximum alone whatever the memory (what a run says of its size before compiling)."""
    if small:
        return small
    period = cycle if cycle > 1 else None
    devices = engine.chunk_devices(program)
    multiple = engine.compiled_batch(1, period, devices)
    cap = min(engine.max_chunk(engine.lockstep_state_bytes(program, hp_names, task)) * (devices or 1),
              engine.max_sequential_chunk(program))
    size = grid.chunk_size_for(n_runs, 1, cap=cap, multiple=multiple)
    if by_memory and n_runs > engine.PROBE_BATCH:
        budget = engine.memory_budget()
        fixed, per_trajectory = engine.rough_bytes(program, hp_names, task, cycle)
        if fixed + engine.compiled_batch(min(n_runs, cap), period, devices) * per_trajectory > budget // engine.ROUGH_SHARE:
            size = grid.chunk_size_for(n_runs, engine.bytes_per_trajectory(program, hp_names, task),
                                       budget=budget, cap=cap, multiple=multiple)
    return engine.compiled_batch(size, period, devices)


def seed_cycle(sweep: Sweep, program: engine.Program) -> int:
    """The number of seeds of a sweep's per-seed layout (`engine.seed_slots`: the data drawn once
    per seed, whatever the chunk size); 1 for any other sweep, and for a program that runs its
    trajectories one by one, each drawing its own seed's data (`engine.run_sequential`)."""
    if program.sequential:
        return 1
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
    which would make the layout, and so the roundings, depend on the machine). The whole grid
    where chunks do not follow the leading axis (`engine.follows_leading_axis`: an accelerator)."""
    if not engine.follows_leading_axis():
        return sweep.n_runs
    return grid.aligned_group(sweep.axes, engine.compiled_batch(1, _seed_period(sweep, program), devices=1))


def compile_sweep(sweep: Sweep, program: engine.Program, task: dict, size: int, group: int) -> engine.CompiledChunk:
    """The chunk program of a sweep for chunks of `size` that never straddle `group` run ids
    (`grid.aligned_group`): the axes with one value per chunk enter it unbatched, and data drawn
    per seed is kept once per seed in the sweep's per-seed layout (`engine.seed_slots`)."""
    follows_leading = group < sweep.n_runs
    return engine.compile_chunk(program, size, list(sweep.axes), task, sweep.seed,
                                constant=grid.constant_axes(sweep.axes, follows_leading),
                                seeds=engine.seed_slots(program.model, sweep.axes), small=small_batch(sweep, program),
                                switched=switched_axes(sweep))


def switched_axes(sweep: Sweep) -> dict[str, tuple]:
    """Every axis and its values: what a one-by-one program with `Program.switches` may compile
    in per run (`engine.compile_chunk`'s `switched`)."""
    return {name: tuple(values.tolist()) for name, values in sweep.axes.items()}


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
                         len(program.record_steps), Columns.of(program, list(sweep.axes), task), sweep.dtype,
                         sweep.record.trajectories)


def _own_chunks(plan: list[grid.Chunk], shard: tuple[int, int] | None) -> list[grid.Chunk]:
    """The chunks of shard (K, N): chunks K-1, K-1+N, ...; every chunk without a shard."""
    return [c for c in plan if shard is None or c.index % shard[1] == shard[0] - 1]


def _chunks_to_run(own: list[grid.Chunk], finished: set[int], max_chunks: int | None) -> list[grid.Chunk]:
    """The chunks a call runs: the unfinished ones of its own (`_own_chunks`), at most `max_chunks`."""
    todo = [c for c in own if c.index not in finished]
    return todo if max_chunks is None else todo[:max_chunks]


def _sweep_chunk_size(sweep: Sweep, program: engine.Program, task: dict, group: int, by_memory: bool = True) -> int:
    """`default_chunk_size` of a sweep's chunk groups, with its seed cycle and small batch."""
    return default_chunk_size(program, group, list(sweep.axes), task, seed_cycle(sweep, program),
                              small_batch(sweep, program), by_memory)


def _fresh_manifest(sweep: Sweep, program: engine.Program, flat: grid.Grid, task: dict, chunk_size: int | None,
                    group: int) -> dict:
    """The manifest of a new run folder: its chunk plan, of `chunk_size` or the default chunk size."""
    size = chunk_size or _sweep_chunk_size(sweep, program, task, group)
    return store.new_manifest(sweep, flat.size, size, len(grid.chunks(flat.size, size, group)), group)


@restores_x64
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
        finished, source = set(), "given" if chunk_size else "from the memory and cache estimates"
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
                to_run=len(_chunks_to_run(_own_chunks(chunks, shard), finished, max_chunks)),
                disk=_disk(sweep, program, task, len(chunks)))


@restores_x64
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
    with store.locked(folder, shard):              # a refused second writer says nothing but why
        if say is not None:
            largest = chunk_size or _sweep_chunk_size(sweep, program, task, group, by_memory=False)
            n_chunks = len(grid.chunks(flat.size, largest, group))
            say(size_line(folder, sweep.axes, sweep.steps, _disk(sweep, program, task, n_chunks)))
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
        own = _own_chunks(plan, shard)
        finished = _verified_chunks(folder, manifest, own, store.tables_of(sweep))
        todo = _chunks_to_run(own, finished, max_chunks)
        compile_seconds, run_seconds, traj_steps = 0.0, 0.0, 0
        short = todo and _disk(sweep, program, task, len(plan)).beyond_free_space(folder, len(todo) / len(plan))
        if short:
            warnings.warn(short, DlsweepWarning, stacklevel=2)
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


def _verified_chunks(folder: Path, manifest: dict, own: list[grid.Chunk], tables: tuple[str, ...]) -> set[int]:
    """The finished chunks whose parts match their records. A damaged chunk (a part missing,
    truncated, emptied or changed) is forgotten, so it is computed again, with a warning naming
    it; whole parts without a record (a run stopped before writing it) are adopted, of the `own`
    chunks alone: another shard's parts without a record may be that shard writing its record now."""
    for index, why in store.damaged_chunks(folder).items():
        warnings.warn(f"{folder}: chunk {index} is damaged ({why}); computing it again", DlsweepWarning, stacklevel=3)
        store.forget_chunk(folder, index)
    finished = store.finished_chunks(folder)
    pending = [c for c in own if c.index not in finished]
    unreadable = {c.index for c in pending if (folder / store.CHUNKS / store.record_name(c.index)).exists()}
    for index in store.adopt_parts(folder, manifest, pending, tables):
        if index in unreadable:
            warnings.warn(f"{folder}: chunk {index}'s record {store.CHUNKS}/{store.record_name(index)} was unreadable; "
                          f"its parts are whole and kept, the record written again", DlsweepWarning, stacklevel=3)
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


RESTORE_SPEC = "run the sweep's spec again on this folder (out=DIR): it writes {spec} back and keeps the finished chunks"


def _folder_spec(folder: Path, manifest: dict) -> tuple[Sweep | None, str | None]:
    """The resolved spec of a run folder with a manifest, or None and what is wrong with it:
    missing, not a spec (the load error) or another sweep's (its hash)."""
    path = folder / store.SPEC_FILE
    if not path.exists():
        return None, f"{path} is missing"
    try:
        sweep = spec_module.load(path)
    except spec_module.SpecError as err:
        return None, str(err)
    if sweep.spec_hash() != manifest["spec_hash"]:
        return None, f"{path} is another sweep's (spec hash {sweep.spec_hash()}, the manifest's {manifest['spec_hash']})"
    return sweep, None


def folder_sweep(folder: str | Path) -> Sweep:
    """The resolved spec of a run folder (its sweep.toml); where it is missing or damaged in a
    folder with a manifest, a StoreError that says how to write it back."""
    folder = Path(folder)
    manifest = store.read_manifest(folder) if folder.is_dir() else None
    if manifest is None:
        if not (folder / store.SPEC_FILE).exists():
            raise store.StoreError(f"{folder}: no {store.SPEC_FILE}; not a dlsweep run folder")
        return spec_module.load(folder / store.SPEC_FILE)
    sweep, problem = _folder_spec(folder, manifest)
    if problem:
        raise store.StoreError(f"{problem}; {RESTORE_SPEC.format(spec=store.SPEC_FILE).replace('DIR', str(folder))}")
    return sweep


def show(folder: str | Path) -> dict:
    """A summary of a finished or partial run folder: what is finished, what is missing or
    damaged (a part that no longer matches its chunk's record), and the outcome of the runs."""
    folder = Path(folder)
    manifest = store.read_manifest(folder)
    if manifest is None:
        raise store.StoreError(f"{folder}: no {store.MANIFEST}; not a dlsweep run folder")
    damaged = store.damaged_chunks(folder)
    finished = store.finished_chunks(folder) - set(damaged)
    damaged |= {index: f"{store.CHUNKS}/{store.record_name(index)} unreadable" for index in store.unreadable_records(folder)}
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
    }
    unknown = f"unknown ({store.MANIFEST} rebuilt from the chunk records)"
    summary |= {"backend": f"{manifest['backend']} {manifest.get('devices')}" if manifest.get("backend") else unknown,
                "versions": manifest.get("versions") or unknown, "created": manifest.get("created") or unknown}
    sweep, problem = _folder_spec(folder, manifest)
    if problem:
        summary["spec"] = f"{problem}; thresholds and plot need it"
        summary["to_do"] = RESTORE_SPEC.format(spec=store.SPEC_FILE).replace("DIR", str(folder))
    if not store.records_trajectories(folder):
        summary["trajectories"] = "not recorded ([record] trajectories = false)"
    if manifest.get("rebuilt"):
        summary["manifest"] = f"{store.MANIFEST} missing or damaged; read from the chunk records"
    if damaged and "to_do" not in summary:
        summary["to_do"] = f"{store.RESUME.replace('DIR', str(folder))}: it computes the damaged chunks again (keeps their parts where only a record is unreadable)"
    if finished:
        runs = load(folder, chunks=finished)
        summary["diverged"] = int(runs["diverged"].sum())
        if summary["diverged"] and sweep is not None:
            summary["diverged_where"] = diverged_where(runs, sweep.axes)
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
