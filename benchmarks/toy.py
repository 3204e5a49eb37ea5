"""dlsweep end-to-end on the toy sweep, through `dlsweep.api.run`.

Three measurements of the same sweep: the compiled chunk programs alone (`engine_compute`: compile
once, then every chunk with results copied to NumPy, no tables or files), the whole `api.run`
call (compile, chunks, pandas tables and Parquet writing, the writing of one chunk overlapped with
the computing of the next), and the whole call without the trajectories table (`[record]
trajectories = false`, its runs table checked equal to the first's).

`overlap` measures the first two again in a child process that may use this process's core and one
more (`python -m benchmarks.toy --overlap`): there the writing of a chunk runs on the second core
while the first computes the next, as on any machine with more than one core.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import DEPTHS, LEVELS, LR, SIGMA0_LOG10, SIGMA_STAR, Problem, Timing, timed


def spec_dict(problem: Problem, levels=LEVELS, trajectories: bool = True) -> dict:
    """The toy sweep: depths 1..6 x log-spaced sigma0, lr 1e-3, f32; stop.rel_loss = 0 so no
    trajectory converges early (every one runs all `steps`; checked after the run). `levels = ()`
    is the same sweep without hitting times; `trajectories = False` without its trajectories table."""
    return {
        "name": "bench-toy",
        "model": "toy",
        "steps": problem.steps,
        "dtype": "float32",
        "task": {"sigma_star": list(SIGMA_STAR)},
        "axes": {"depth": list(DEPTHS),
                 "sigma0": {"logspace": list(SIGMA0_LOG10), "num": problem.n_sigma0},
                 "lr": [LR]},
        "record": {"levels": list(levels)} | ({} if trajectories else {"trajectories": False}),  # schedule/points: defaults
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
    run: Timing              # the compiled chunk programs alone (engine_compute)
    total: Timing            # the whole api.run call
    lean: Timing             # the whole api.run call without the trajectories table
    report_compile_seconds: float    # the whole call's own compile (or load from the compilation cache)
    lean_compile_seconds: float
    output_bytes: int
    lean_bytes: int
    runs: "object"           # the runs table (pandas), for checks and cross-checks
    checks: dict


def engine_compute(sweep, chunk_size: int | None, on_chunk=None) -> tuple[Timing, Timing, int, int]:
    """The compiled chunk programs alone, as `api.run` sets them up: compile once, then every chunk
    of the grid (dispatch + copy of results to NumPy), with no tables or files. `on_chunk(chunk,
    summary)`, if given, receives each chunk's summary arrays (e.g. to keep the hitting steps)."""
    from dlsweep import api, grid

    program, flat, task = api.compile_inputs(sweep)
    group = api.chunk_group(sweep, program)
    size = chunk_size or api.default_chunk_size(program, group, list(flat.columns), task)
    with timed() as compile_time:
        compiled = api.compile_sweep(sweep, program, task, size, group)
    plan = grid.chunks(flat.size, size, group)
    with timed() as run_time:
        for chunk in plan:
            summary, _ = compiled(np.arange(chunk.start, chunk.stop), flat.rows(chunk.start, chunk.stop), task)
            if on_chunk is not None:
                on_chunk(chunk, summary)
    return compile_time, run_time, size, len(plan)


def engine_without_hits(problem: Problem, chunk_size: int | None = None) -> tuple[Timing, Timing]:
    """`engine_compute` on the same sweep with `levels = []`: the GD steps, stop checks and records
    alone, nothing watched for hitting times."""
    from dlsweep import spec

    compile_time, run_time, _, _ = engine_compute(spec.resolve(spec_dict(problem, levels=()), "benchmarks.toy"),
                                                  chunk_size)
    return compile_time, run_time


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run_dlsweep(problem: Problem, chunk_size: int | None = None, workdir: str | None = None) -> DlsweepResult:
    from dlsweep import api, engine, spec, store

    sweep = spec.resolve(spec_dict(problem), source="benchmarks.toy")
    with tempfile.TemporaryDirectory(prefix="dlsweep-bench-", dir=workdir) as tmp:
        out = Path(tmp) / sweep.name
        compile_time, run_time, _, _ = engine_compute(sweep, chunk_size)
        with timed() as total:
            report = api.run(sweep, out=out, chunk_size=chunk_size, progress_bar=False)
        manifest = json.loads((out / store.MANIFEST).read_text())
        runs = store.load(out)
        output_bytes = _folder_bytes(out)
        lean_out = Path(tmp) / "lean"
        lean_sweep = spec.resolve(spec_dict(problem, trajectories=False), source="benchmarks.toy")
        with timed() as lean:
            lean_report = api.run(lean_sweep, out=lean_out, chunk_size=chunk_size, progress_bar=False)
        lean_bytes = _folder_bytes(lean_out)
        lean_runs_equal = store.load(lean_out).equals(runs)
        record_points = len(engine.record_steps(sweep.record.schedule, sweep.record.points, sweep.steps))

    checks = {
        "runs": len(runs),
        "steps_run == steps for all": bool((runs["steps_run"] == problem.steps).all()),
        "diverged": int(runs["diverged"].sum()),
        "converged": int(runs["converged"].sum()),
        "traj_steps == runs x steps": report.traj_steps == len(runs) * problem.steps,
        "runs table without trajectories identical": lean_runs_equal,
    }
    return DlsweepResult(
        n_runs=report.n_runs, traj_steps=report.traj_steps, chunk_size=manifest["chunk_size"],
        n_chunks=manifest["n_chunks"], record_points=record_points,
        compile=compile_time,
        run=run_time,
        total=total, lean=lean, report_compile_seconds=report.compile_seconds,
        lean_compile_seconds=lean_report.compile_seconds, output_bytes=output_bytes,
        lean_bytes=lean_bytes,
        runs=runs, checks=checks)


def with_another_core(own: set[int], online: set[int]) -> set[int] | None:
    """This process's cores and the lowest-numbered other core of the machine; None when it has
    no other."""
    others = sorted(online - own)
    return own | {others[0]} if others else None


@dataclasses.dataclass
class Overlap:
    cores: list[int]
    engine: float            # s: the chunk programs alone (engine_compute), best of `repeats`
    whole: float             # s: the whole api.run call less its own compile, best of `repeats`
    repeats: int


def overlap(problem: Problem, cores: set[int], chunk_size: int | None = None, workdir: str | None = None,
            repeats: int = 2) -> Overlap:
    """The chunk programs alone and the whole `api.run` call less its compile (wall times),
    alternated `repeats` times, best of each, in a child process that moves to `cores` before it
    imports JAX (so XLA sees them all)."""
    config = {"cores": sorted(cores), "n_sigma0": problem.n_sigma0, "steps": problem.steps, "chunk_size": chunk_size,
              "workdir": workdir, "repeats": repeats}
    done = subprocess.run([sys.executable, "-m", "benchmarks.toy", "--overlap", json.dumps(config)],
                          capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    if done.returncode:
        raise SystemExit(f"benchmarks.toy --overlap failed on cores {sorted(cores)}:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.splitlines()[-1])
    return Overlap(sorted(cores), result["engine"], result["whole"], repeats)


def _overlap_child(config: dict) -> dict[str, float]:
    """`overlap`'s measurements, in this process: the best engine pass and the best whole call
    less its compile, wall seconds."""
    os.sched_setaffinity(0, config["cores"])
    from dlsweep import api, spec

    problem = Problem(n_sigma0=config["n_sigma0"], steps=config["steps"])
    sweep = spec.resolve(spec_dict(problem), source="benchmarks.toy")
    engine, whole = [], []
    for _ in range(config["repeats"]):
        engine.append(engine_compute(sweep, config["chunk_size"])[1].wall)
        with tempfile.TemporaryDirectory(prefix="dlsweep-bench-", dir=config["workdir"]) as tmp:
            with timed() as total:
                report = api.run(sweep, out=Path(tmp) / sweep.name, chunk_size=config["chunk_size"],
                                 progress_bar=False)
        whole.append(total.wall - report.compile_seconds)
    return {"engine": min(engine), "whole": min(whole)}


def hits_of(runs, run_ids: np.ndarray) -> np.ndarray:
    """dlsweep's first-hitting steps of `run_ids`, shape (m, k, n_levels)."""
    from dlsweep import store

    columns = store.hit_columns(len(SIGMA_STAR), LEVELS)
    table = runs.set_index("run_id").loc[run_ids, columns].to_numpy()
    return table.reshape(len(run_ids), len(SIGMA_STAR), len(LEVELS))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.toy")
    parser.add_argument("--overlap", required=True, help="`overlap`'s settings as JSON (it starts this)")
    print(json.dumps(_overlap_child(json.loads(parser.parse_args().overlap))))
