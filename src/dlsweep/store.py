"""The dataset on disk.

    DIR/sweep.toml                 the resolved spec
    DIR/manifest.json              spec hash, versions, backend, devices, chunk plan and status
    DIR/runs/part-NNNNN.parquet    one row per trajectory (chunk NNNNN)
    DIR/trajectories/part-NNNNN.parquet   one row per (run_id, recorded step)

Every file is written under a temporary dot-name and renamed into place, so a killed run leaves
only whole files, and readers (which skip dot-files) never see a partial one. A chunk is finished
when its `runs` part exists; it is written last. One writer at a time holds `DIR/.lock`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from dlsweep import __version__
from dlsweep.models import INTEGER_HPS

if TYPE_CHECKING:
    from dlsweep.spec import Sweep

RUNS, TRAJECTORIES = "runs", "trajectories"
MANIFEST, SPEC_FILE, LOCK, INIT_LOCK = "manifest.json", "sweep.toml", ".lock", ".lock-init"
MANIFEST_KEYS = ("name", "model", "spec_hash", "n_runs", "chunk_size", "group", "n_chunks", "chunks")


class StoreError(RuntimeError):
    """A dataset folder that cannot be written or read as asked; the message says why and what to do."""


PART_PATTERN = re.compile(r"part-(\d+)\.parquet")


def part_name(chunk_index: int) -> str:
    return f"part-{chunk_index:05d}.parquet"


def _temporary(path: Path) -> Path:
    """A dot-named sibling that readers skip, tagged with this writer's host and pid."""
    return path.with_name(f".{path.name}.tmp-{platform.node()}-{os.getpid()}")


def _replace_atomically(path: Path, write) -> None:
    """`write(tmp)` to a dot-named temporary, then rename it over `path`: readers see the old
    file or the whole new one, never a part."""
    tmp = _temporary(path)
    write(tmp)
    os.replace(tmp, path)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    _replace_atomically(path, write)


def _atomic_write_parquet(path: Path, frame: pd.DataFrame) -> None:
    """Dictionary encoding for the integer and flag columns only: float columns almost never
    repeat, and encoding them costs half the writing time for nothing."""
    repeated = [c for c in frame.columns if frame[c].dtype.kind in "iub"]
    _replace_atomically(path, lambda tmp: frame.to_parquet(tmp, index=False, use_dictionary=repeated))


def _gone(host: str, pid: str) -> bool:
    """Whether the process `pid` on `host` is known to have exited: only a process of this host
    can be checked, so any other (or an unreadable pid) counts as possibly alive."""
    if host != platform.node() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


def _sweep_dead_temporaries(folder: Path) -> None:
    """Remove temporaries whose writer (a process on this host) is gone; a live writer's stay."""
    for tmp in folder.glob("**/.*.tmp-*"):
        host, _, pid = tmp.name.rpartition(".tmp-")[2].rpartition("-")
        if _gone(host, pid):
            tmp.unlink(missing_ok=True)


def _open_lock(path: Path):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a+")
    except OSError as err:
        raise StoreError(f"{path.parent}: cannot be used as a run folder ({err.strerror}); choose another --out") from None


def _claim(fh, text: str) -> None:
    fh.seek(0)
    fh.truncate()
    fh.write(text)
    fh.flush()


def _holders(folder: Path) -> str:
    """The live writers named in the lock files (a killed writer's claim is left behind)."""
    texts = [p.read_text().strip() for p in sorted(folder.glob(".lock*")) if p.name != INIT_LOCK]
    return "; ".join(t for t in texts if t and _alive(t)) or "another process"


def _alive(claim: str) -> bool:
    """Whether the writer of a lock claim ('dlsweep run pid N on HOST ...') may still run."""
    found = re.search(r"pid (\d+) on (\S+)", claim)
    return not (found and _gone(found.group(2), found.group(1)))


@contextlib.contextmanager
def locked(folder: Path, shard: tuple[int, int] | None = None):
    """Hold the folder's writer lock. A plain run holds it alone: any other writer is refused, not
    interleaved. Shard K of N holds it shared with the other shards (each writes its own chunks),
    plus a lock of its own, so a plain run and a second copy of the same shard are refused. The
    locks are the kernel's (flock): they go away with a killed process."""
    fh = _open_lock(folder / LOCK)
    shard_fh = None
    me = f"dlsweep run pid {os.getpid()} on {platform.node()}"
    try:
        fcntl.flock(fh, (fcntl.LOCK_SH if shard else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        if shard:
            shard_fh = _open_lock(folder / f"{LOCK}-shard-{shard[0]}-of-{shard[1]}")
            fcntl.flock(shard_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        for handle in (fh, shard_fh):
            if handle is not None:
                handle.close()
        raise StoreError(f"{folder} is being written by {_holders(folder)}; wait for it to finish "
                         "(a second `dlsweep run` on the same folder, or the same shard, is refused)") from None
    _claim(shard_fh or fh, me + (f" (shard {shard[0]}/{shard[1]})" if shard else ""))
    try:
        yield
    finally:
        for handle in (shard_fh, fh):
            if handle is not None:
                _claim(handle, "")
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()


@contextlib.contextmanager
def initializing(folder: Path):
    """Serialize the short critical sections of concurrent shards: creating the manifest and the
    chunk plan, and read-modify-write updates of the manifest."""
    fh = _open_lock(folder / INIT_LOCK)
    fcntl.flock(fh, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def update_manifest(folder: Path, change) -> dict:
    """Apply `change(manifest)` to the manifest on disk, safe against concurrent shards."""
    with initializing(folder):
        manifest = read_manifest(folder)
        change(manifest)
        write_manifest(folder, manifest)
    return manifest


def read_manifest(folder: Path) -> dict | None:
    path = Path(folder) / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise StoreError(f"{path} is damaged ({err}); pass --overwrite to start the run over") from None
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise StoreError(f"{path} is damaged (no {', '.join(missing)}); pass --overwrite to start the run over")
    return manifest


def write_manifest(folder: Path, manifest: dict) -> None:
    manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    _atomic_write_bytes(Path(folder) / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode())


def new_manifest(sweep: Sweep, n_runs: int, chunk_size: int, n_chunks: int, group: int) -> dict:
    import jax
    import jaxlib

    return {
        "name": sweep.name,
        "model": sweep.model,
        "spec_hash": sweep.spec_hash(),
        "n_runs": n_runs,
        "chunk_size": chunk_size,
        "group": group,                 # chunks never straddle a multiple of this many run ids
        "n_chunks": n_chunks,
        "versions": {"dlsweep": __version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "chunks": {},
    }


def prepare(folder: Path, sweep: Sweep, overwrite: bool) -> dict | None:
    """Check an existing folder against `sweep` (call with the lock held).

    Returns the existing manifest to resume from, or None for a fresh folder; refuses a folder
    that holds a different sweep unless `overwrite`, which empties it."""
    manifest = read_manifest(folder)
    if overwrite:
        for child in folder.iterdir():
            if child.name.startswith(LOCK):
                continue
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        return None
    if manifest is None:
        leftovers = [c.name for c in folder.iterdir() if not c.name.startswith(".")]
        if leftovers:
            raise StoreError(f"{folder} is not empty and has no {MANIFEST} ({', '.join(sorted(leftovers)[:3])} ...); "
                             "choose another --out or pass --overwrite")
        return None
    if manifest["spec_hash"] != sweep.spec_hash():
        raise StoreError(f"{folder} holds a different sweep (spec hash {manifest['spec_hash']} there, "
                         f"{sweep.spec_hash()} now); pass --overwrite to start over or --out for a new folder")
    _sweep_dead_temporaries(folder)
    return manifest


def start(folder: Path, sweep: Sweep, manifest: dict) -> None:
    """Lay out a run folder: the manifest first (it makes the folder resumable), then the resolved
    spec and the part folders. Idempotent, so a resume repairs a start that was cut short."""
    write_manifest(folder, manifest)
    _atomic_write_bytes(folder / SPEC_FILE, sweep.to_toml().encode())
    for sub in (RUNS, TRAJECTORIES):
        (folder / sub).mkdir(exist_ok=True)


def finished_chunks(folder: Path) -> set[int]:
    """Chunks whose `runs` part exists (the part written last)."""
    runs = Path(folder) / RUNS
    if not runs.is_dir():
        return set()
    return {int(found.group(1)) for p in runs.iterdir() if (found := PART_PATTERN.fullmatch(p.name))}


def completeness(folder: str | Path) -> tuple[int, int]:
    """(finished chunks, chunks in the plan) of a run folder: a run is partial while the first is
    smaller, and every reader of a partial run says so."""
    manifest = read_manifest(Path(folder))
    total = manifest["n_chunks"] if manifest else 0
    return len(finished_chunks(folder)), total


def partial_note(folder: str | Path) -> str | None:
    """'partial: x of y chunks' for a run folder that is not complete, else None."""
    done, total = completeness(folder)
    return f"partial: {done} of {total} chunks" if done < total else None


def write_table(path: Path, frame: pd.DataFrame) -> None:
    """A whole-table result (e.g. thresholds.parquet), written atomically."""
    _atomic_write_parquet(Path(path), frame)


def write_chunk(folder: Path, chunk_index: int, runs: pd.DataFrame, trajectories: pd.DataFrame) -> None:
    """Trajectories first, then runs: a chunk counts as finished only once both exist."""
    _atomic_write_parquet(folder / TRAJECTORIES / part_name(chunk_index), trajectories)
    _atomic_write_parquet(folder / RUNS / part_name(chunk_index), runs)


def level_name(level: float) -> str:
    """Column-name form of a hitting level: 100 * level printed with %g (0.05 -> '5')."""
    return f"{100 * level:g}"


def hit_columns(n_values: int, levels) -> list[str]:
    """`hit_<i>_<pct>` for value i and level L (pct = 100 L with %g), value-major."""
    return [f"hit_{i}_{level_name(level)}" for i in range(n_values) for level in levels]


def vector_columns(frame: pd.DataFrame, name: str) -> list[str]:
    """The columns `name_0`, `name_1`, ... that a recorded vector `name` became, in index order."""
    return sorted((c for c in frame.columns if re.fullmatch(rf"{name}_\d+", c)), key=lambda c: int(c.rsplit("_", 1)[1]))


def selection_order(chosen: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per run, the features the model selected in the order it selected them (ties by index)
    and the steps it did, from the (B, n) first-selection steps (-1: never selected)."""
    order, at = [], []
    for steps in chosen.astype(np.int64):
        features = np.flatnonzero(steps >= 0)
        features = features[np.argsort(steps[features], kind="stable")]
        order.append(features)
        at.append(steps[features])
    return order, at


def chunk_frames(sweep: Sweep, run_ids: np.ndarray, hps: dict[str, np.ndarray], summary: dict,
                 records: tuple[np.ndarray, dict], record_steps: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tidy tables of one chunk: one row per trajectory, one per (trajectory, recorded step)
    up to the step where the trajectory stopped, that step included, with the loss and every
    observed value (`sigma` -> sigma_0, sigma_1, ...; any other observation `name` -> a column
    `name`, or name_0, name_1, ... for a vector); the model's summaries of its final state are
    columns too, a vector one (a final predictor) as a list column. Models that select features add
    the list columns `selected` (feature indices in the order chosen) and `selected_at`."""
    n, n_values = len(run_ids), summary["hit"].shape[1]
    runs = {"run_id": run_ids.astype(np.int64)}
    runs.update({name: values for name, values in hps.items()})
    runs["final_loss"] = summary["final_loss"].astype(np.float64)
    runs["diverged"] = summary["diverged"].astype(bool)
    runs["converged"] = summary["converged"].astype(bool)
    runs["steps_run"] = summary["steps_run"].astype(np.int64)
    hits = summary["hit"].reshape(n, -1).astype(np.int64)
    for column, values in zip(hit_columns(n_values, sweep.record.levels), hits.T):
        runs[column] = values
    for column, values in summary.get("scalars", {}).items():      # the model's summaries of its final state
        runs[column] = values.astype(np.float64) if values.ndim == 1 else list(values.reshape(n, -1).astype(np.float64))
    if summary["chosen"].shape[1]:
        runs["selected"], runs["selected_at"] = selection_order(summary["chosen"])

    loss, observed = records
    steps = np.asarray(record_steps, np.int64)
    # A trajectory that stopped at steps_run is frozen: the first record after its stop holds its
    # state at steps_run and is shown at that step; the (identical) records after it are dropped.
    previous = np.concatenate([[-1], steps[:-1]])
    shown = runs["steps_run"][:, None] > previous[None, :]           # (B, R), row-major: by run, then step
    trajectories = {"run_id": np.broadcast_to(runs["run_id"][:, None], shown.shape)[shown],
                    "step": np.minimum(steps[None, :], runs["steps_run"][:, None])[shown],
                    "loss": loss.T[shown].astype(np.float64)}
    for name, values in observed.items():
        if values.ndim == 2:                                        # (R, B): a scalar per step
            trajectories[name] = values.T[shown].astype(np.float64)
        else:                                                       # (R, B, n): a vector per step
            for i in range(values.shape[2]):
                trajectories[f"{name}_{i}"] = values[:, :, i].T[shown].astype(np.float64)
    return pd.DataFrame(runs), pd.DataFrame(trajectories)


def load(folder: str | Path) -> pd.DataFrame:
    """The runs table of a dataset (finished chunks), sorted by run_id, with tidy dtypes."""
    frame = _read_parts(Path(folder), RUNS)
    ints = [c for c in frame.columns if c in ("run_id", *INTEGER_HPS, "steps_run") or c.startswith("hit_")]
    frame = frame.astype({c: "int64" for c in ints} | {c: "bool" for c in ("diverged", "converged") if c in frame})
    return frame.sort_values("run_id", ignore_index=True)


def load_trajectories(folder: str | Path) -> pd.DataFrame:
    """The trajectories table (one row per run and recorded step) of finished chunks, sorted by
    run_id and step."""
    frame = _read_parts(Path(folder), TRAJECTORIES)
    return frame.sort_values(["run_id", "step"], ignore_index=True)


def _read_parts(folder: Path, table: str) -> pd.DataFrame:
    """The parts of `table` that belong to finished chunks (a chunk is finished once its runs part
    exists), concatenated."""
    parts = [p for i in sorted(finished_chunks(folder)) if (p := folder / table / part_name(i)).exists()]
    if not parts:
        raise StoreError(f"{folder}: no finished chunks in {table}/ (is this a dlsweep run folder?)")
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
