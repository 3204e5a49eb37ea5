"""Launch the shards of a sweep through submitit: Slurm job arrays (requeued on preemption) or
local processes. Each job is `dlsweep run --shard K/N` on the same folder; no scheduler of our own.
submitit is an optional extra (`pip install 'dlsweep[cluster]'`), imported only here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from dlsweep import api
from dlsweep import spec as spec_module
from dlsweep.spec import SpecError, Sweep, check_counts
from dlsweep.store import StoreError

EXECUTORS = ("local", "slurm")


@dataclasses.dataclass(frozen=True)
class ShardJob:
    """One shard of a sweep as a submitit job. A job that is preempted or times out is requeued
    (`checkpoint`) and resumes: the chunks it finished are skipped."""

    sweep: Sweep
    folder: str
    chunk_size: int | None = None

    def __call__(self, shard: int, shards: int) -> dict:
        report = api.run(self.sweep, out=self.folder, shard=(shard, shards), chunk_size=self.chunk_size,
                         progress_bar=False)
        return {"shard": shard, "chunks_run": report.chunks_run, "traj_steps": report.traj_steps,
                "run_seconds": report.run_seconds, "compile_seconds": report.compile_seconds}

    def checkpoint(self, shard: int, shards: int):
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, shard, shards)


def _cause(message: str) -> str:
    """The exception line of a failed job's report (submitit ends it with the log paths)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b.*:", line)]
    return errors[-1] if errors else lines[0] if lines else "unknown error"


@dataclasses.dataclass(frozen=True)
class Submitted:
    folder: Path
    job_ids: list[str]
    results: list[dict] | None        # when waited for


def submit(spec: str | Path | Sweep, shards: int, executor: str = "local", out: str | Path | None = None,
           overrides=(), partition: str | None = None, gpus_per_task: int | None = None,
           cpus_per_task: int | None = None, time_min: int = 60, mem_gb: float | None = None,
           chunk_size: int | None = None, wait: bool | None = None) -> Submitted:
    """Run a sweep as `shards` jobs sharing one dataset folder. Waits for the jobs (and raises if
    one failed) when `wait`, by default for the local executor only."""
    sweep = spec if isinstance(spec, Sweep) else spec_module.load(spec, overrides)
    check_counts({"shards": shards, "chunk_size": chunk_size})
    if executor not in EXECUTORS:
        raise SpecError(f"executor={executor!r}: expected one of {', '.join(EXECUTORS)}")
    try:
        import submitit
    except ImportError:
        raise StoreError("`dlsweep submit` needs submitit: pip install 'dlsweep[cluster]' (or pip install submitit)") from None
    folder = Path(out) if out is not None else api.default_folder(sweep)
    folder.mkdir(parents=True, exist_ok=True)
    runner = submitit.AutoExecutor(folder=folder / ".submitit" / "%j", cluster=executor)
    parameters = {"timeout_min": time_min, "name": f"dlsweep-{sweep.name}", "tasks_per_node": 1}
    if executor == "slurm":
        parameters |= {k: v for k, v in {"slurm_partition": partition, "gpus_per_node": gpus_per_task,
                                         "cpus_per_task": cpus_per_task, "mem_gb": mem_gb}.items() if v is not None}
    runner.update_parameters(**parameters)
    jobs = runner.map_array(ShardJob(sweep, str(folder), chunk_size), list(range(1, shards + 1)), [shards] * shards)
    results = None
    if wait if wait is not None else executor == "local":
        try:
            results = [job.result() for job in jobs]
        except submitit.core.utils.UncompletedJobError as err:
            raise StoreError(f"a shard of {folder} failed: {_cause(str(err))}; logs in {folder / '.submitit'}; "
                             "finished chunks are kept") from None
    return Submitted(folder, [job.job_id for job in jobs], results)
