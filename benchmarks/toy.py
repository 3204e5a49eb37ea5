"""dlsweep end-to-end on the toy sweep, through `dlsweep.api.run`.

`api.run` reports compile and run wall times itself (`RunReport`). To put process CPU time beside
them, `engine.compile_chunk` and `engine.CompiledChunk.__call__` are wrapped for the duration of the
call (nothing under src/ is changed; the wrappers only read clocks and are removed afterwards).
`run` time is what `RunReport.run_seconds` counts: the compiled chunk program plus copying its
results to NumPy, summed over chunks. Everything else in the wall time (spec, grid, manifest,
building the pandas frames, Parquet writing) is `total - compile - run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import DEPTHS, LEVELS, LR, SIGMA0_LOG10, SIGMA_STAR, Problem, Timing, timed


def spec_dict(problem: Problem) -> dict:
    """The toy sweep: depths 1..6 x log-spaced sigma0, lr 1e-3, f32; stop.rel_loss = 0 so no
    trajectory converges early (every one runs all `steps`; checked after the run)."""
    return {
        "name": "bench-toy",
        "model": "toy",
        "steps": problem.steps,
        "dtype": "float32",
        "task": {"sigma_star": list(SIGMA_STAR)},
        "axes": {"depth": list(DEPTHS),
                 "sigma0": {"logspace": list(SIGMA0_LOG10), "num": problem.n_sigma0},
                 "lr": [LR]},
        "record": {"levels": list(LEVELS)},      # schedule/points: dlsweep defaults (log, 200)
        "stop": {"rel_loss": 0.0},
    }


@dataclasses.dataclass
class DlsweepResult:
    n_runs: int
    traj_steps: int
    chunk_size: int
    n_chunks: int
    record_points: int
    compile: Timing
    run: Timing              # wall = RunReport.run_seconds; cpu = process CPU inside the chunk calls
    total: Timing            # the whole api.run call
    report_compile_seconds: float
    output_bytes: int
    runs: "object"           # the runs table (pandas), for checks and cross-checks
    checks: dict


@contextlib.contextmanager
def _instrumented():
    """Process CPU time of the compile and of the chunk calls inside api.run."""
    from dlsweep import api, engine

    acc = {"compile_cpu": 0.0, "run_cpu": 0.0, "run_wall": 0.0}
    original_compile = engine.compile_chunk
    original_call = engine.CompiledChunk.__call__

    def compile_chunk(*args, **kwargs):
        cpu = time.process_time()
        try:
            return original_compile(*args, **kwargs)
        finally:
            acc["compile_cpu"] += time.process_time() - cpu

    def call(self, *args, **kwargs):
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return original_call(self, *args, **kwargs)
        finally:
            acc["run_cpu"] += time.process_time() - cpu
            acc["run_wall"] += time.perf_counter() - wall

    engine.compile_chunk = compile_chunk            # api.run looks it up as engine.compile_chunk
    engine.CompiledChunk.__call__ = call
    try:
        yield acc
    finally:
        engine.compile_chunk = original_compile
        engine.CompiledChunk.__call__ = original_call
        assert api.engine is engine


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run_dlsweep(problem: Problem, chunk_size: int | None = None, workdir: str | None = None) -> DlsweepResult:
    from dlsweep import api, engine, spec, store

    sweep = spec.resolve(spec_dict(problem), source="benchmarks.toy")
    with tempfile.TemporaryDirectory(prefix="dlsweep-bench-", dir=workdir) as tmp:
        out = Path(tmp) / sweep.name
        with _instrumented() as acc, timed() as total:
            report = api.run(sweep, out=out, chunk_size=chunk_size, progress_bar=False)
        manifest = json.loads((out / store.MANIFEST).read_text())
        runs = store.load(out)
        output_bytes = _folder_bytes(out)
        record_points = len(engine.record_steps(sweep.record.schedule, sweep.record.points, sweep.steps))

    checks = {
        "runs": len(runs),
        "steps_run == steps for all": bool((runs["steps_run"] == problem.steps).all()),
        "diverged": int(runs["diverged"].sum()),
        "converged": int(runs["converged"].sum()),
        "traj_steps == runs x steps": report.traj_steps == len(runs) * problem.steps,
    }
    return DlsweepResult(
        n_runs=report.n_runs, traj_steps=report.traj_steps, chunk_size=manifest["chunk_size"],
        n_chunks=manifest["n_chunks"], record_points=record_points,
        compile=Timing(report.compile_seconds, acc["compile_cpu"]),
        run=Timing(report.run_seconds, acc["run_cpu"]),
        total=total, report_compile_seconds=report.compile_seconds, output_bytes=output_bytes,
        runs=runs, checks=checks)


def hits_of(runs, run_ids: np.ndarray) -> np.ndarray:
    """dlsweep's first-hitting steps of `run_ids`, shape (m, k, n_levels)."""
    from dlsweep import store

    columns = store.hit_columns(len(SIGMA_STAR), LEVELS)
    table = runs.set_index("run_id").loc[run_ids, columns].to_numpy()
    return table.reshape(len(run_ids), len(SIGMA_STAR), len(LEVELS))
