"""The dataset on disk.

    DIR/sweep.toml                 the resolved spec
    DIR/manifest.json              spec hash, versions, backend, devices, the chunk plan
    DIR/runs/part-NNNNN.parquet    one row per trajectory (chunk NNNNN)
    DIR/trajectories/part-NNNNN.parquet   one row per (run_id, recorded step); none where the
                                   sweep sets [record] trajectories = false
    DIR/chunks/NNNNN.json          chunk NNNNN's record: its parts' rows, bytes and CRC-32, written last

Every file is written to a temporary dot-name, flushed to disk, renamed into place, and the
folder's entry flushed too, so a killed run (or a full disk) leaves only whole files, and readers
(which skip dot-files) never see a partial one. A chunk is finished when its record exists; it is
written after both parts, by the process that computed the chunk, so concurrent shards (on this
machine or others sharing the folder) never read-modify-write a common file. The manifest is
written once, by whichever writer comes first (an exclusive link), and never changed after; what
has been done is read from the chunk records. Every reader checks a part's size and CRC-32 against
its record, so a truncated or damaged part is named, and a resumed run computes it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import os
import platform
import re
import shutil
import time
import warnings
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dlsweep import __version__
from dlsweep.errors import StoreError
from dlsweep.model import INTEGER_HPS
from dlsweep.warning import DlsweepWarning

if TYPE_CHECKING:
    from dlsweep.spec import Sweep

RUNS, TRAJECTORIES, CHUNKS = "runs", "trajectories", "chunks"
MANIFEST, SPEC_FILE, SHARDS_FILE, LOCK = "manifest.json", "sweep.toml", "shards.json", ".lock"
PLAN_KEYS = ("name", "model", "spec_hash", "n_runs", "chunk_size", "group", "n_chunks")
RESUME = "run the sweep again on this folder (out=DIR) to resume"


RECORD_PATTERN = re.compile(r"(\d+)\.json")


def tables_of(sweep: Sweep) -> tuple[str, ...]:
    """The tables a sweep's chunks write, in the order they are written: its trajectories (unless
    `[record] trajectories = false`), then its runs."""
    return (TRAJECTORIES, RUNS) if sweep.record.trajectories else (RUNS,)


def _written_tables(record: dict) -> tuple[str, ...]:
    """The tables a finished chunk wrote, from its record (both where it names none)."""
    return tuple(t for t in (TRAJECTORIES, RUNS) if t in record.get("parts", {})) or (TRAJECTORIES, RUNS)


def part_name(chunk_index: int) -> str:
    return f"part-{chunk_index:05d}.parquet"


def record_name(chunk_index: int) -> str:
    return f"{chunk_index:05d}.json"


# ----------------------------------------------------------------------------- durable writes


def _temporary(path: Path) -> Path:
    """A dot-named sibling that readers skip, tagged with this writer's host and pid."""
    return path.with_name(f".{path.name}.tmp-{platform.node()}-{os.getpid()}")


def _sync_folder(folder: Path) -> None:
    """Flush a folder's entries (a rename is durable only once its folder is); a file system that
    cannot sync a folder (some network ones) is left to its own guarantees."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_file(path: Path, data: bytes, exclusive: bool = False, hint: str = "") -> bool:
    """Write `data` to `path` durably: a temporary, fsync, rename (or, `exclusive`, a hard link,
    which fails if `path` exists: the first writer wins), fsync of the folder. Readers see the old
    file or the whole new one, never a part. Returns False when `exclusive` found `path` there.
    A failure (disk full, read-only, permissions) removes the temporary and raises a StoreError
    naming the file, followed by `hint`."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        else:
            os.replace(tmp, path)
        _sync_folder(path.parent)
        return True
    except OSError as err:
        raise StoreError(f"cannot write {path} ({err.strerror or err}){'; ' + hint if hint else ''}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _json_bytes(value) -> bytes:
    return (json.dumps(value, indent=2) + "\n").encode()


def _parquet_bytes(frame: pd.DataFrame | pa.Table) -> bytes:
    """A frame or an Arrow table as a Parquet file's bytes. Dictionary encoding for the integer
    and flag columns only: float columns almost never repeat, and encoding them costs half the
    writing time. An Arrow table (the trajectories) keeps min/max statistics for those columns
    only (its run ids and steps, which a reader filters on; 100k toy trajectories x 155 records,
    one core: encoded in 0.52-0.53 s against 0.60-0.66 s with statistics of every column, the
    same bytes), and its float columns are split into byte streams before compression
    (BYTE_STREAM_SPLIT: exponents and high mantissa bytes, which change slowly along a
    trajectory, compress apart from the noisy low bytes): 8-35% fewer bytes on the bundled
    sweeps, as fast to write and to read."""
    buffer = io.BytesIO()
    if isinstance(frame, pa.Table):
        repeated = [f.name for f in frame.schema if pa.types.is_integer(f.type) or pa.types.is_boolean(f.type)]
        floats = [f.name for f in frame.schema if pa.types.is_floating(f.type)]
        pq.write_table(frame, buffer, use_dictionary=repeated, write_statistics=repeated, use_byte_stream_split=floats)
    else:
        repeated = [c for c in frame.columns if frame[c].dtype.kind in "iub"]
        frame.to_parquet(buffer, index=False, use_dictionary=repeated)
    return buffer.getvalue()


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


# ----------------------------------------------------------------------------- the writer lock


def _open_lock(path: Path):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a+")
    except OSError as err:
        raise StoreError(f"{path.parent}: cannot be used as a run folder ({err.strerror}); choose another out folder") from None


def writer_name() -> str:
    """This process as a lock claim and a chunk record name it."""
    return f"pid {os.getpid()} on {platform.node()}"


def _claim(fh, text: str) -> None:
    fh.seek(0)
    fh.truncate()
    fh.write(text)
    fh.flush()


def _holders(folder: Path) -> str:
    """The live writers named in the lock files (a killed writer's claim is left behind)."""
    texts = [p.read_text().strip() for p in sorted(folder.glob(".lock*"))]
    return "; ".join(t for t in texts if t and _alive(t)) or "another process"


def _alive(claim: str) -> bool:
    """Whether the writer of a lock claim ('dlsweep run pid N on HOST ...') may still run."""
    found = re.search(r"pid (\d+) on (\S+)", claim)
    return not (found and _gone(found.group(2), found.group(1)))


@contextlib.contextmanager
def locked(folder: Path, shard: tuple[int, int] | None = None):
    """Hold the folder's writer lock. A plain run holds it alone: any other writer on this machine
    is refused, not interleaved. Shard K of N holds it shared with the other shards (each writes
    its own chunks), plus a lock of its own, so a plain run and a second copy of the same shard are
    refused. The locks are the kernel's (flock): they go away with a killed process. On network
    file systems flock may be local to each machine; shards on several machines stay safe because
    each writes only its own chunks and records (docs/reliability.md)."""
    fh = _open_lock(folder / LOCK)
    shard_fh = None
    me = f"dlsweep run {writer_name()}"
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
                         "(a second run on the same folder, or the same shard, is refused)") from None
    _claim(shard_fh or fh, me + (f" (shard {shard[0]}/{shard[1]})" if shard else ""))
    try:
        yield
    finally:
        for handle in (shard_fh, fh):
            if handle is not None:
                _claim(handle, "")
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()


# ----------------------------------------------------------------------------- manifest and chunk records


def _read_json(path: Path) -> dict | None:
    """A JSON object from `path`, or None when it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def chunk_records(folder: str | Path) -> dict[int, dict]:
    """index -> the record of every finished chunk (an unreadable record counts as unfinished:
    the chunk is computed again)."""
    records = {}
    chunks = Path(folder) / CHUNKS
    for path in sorted(chunks.iterdir()) if chunks.is_dir() else ():
        if (found := RECORD_PATTERN.fullmatch(path.name)) and (record := _read_json(path)) is not None:
            records[int(found.group(1))] = record
    return records


def unreadable_records(folder: str | Path) -> list[int]:
    """The chunks whose record file exists but cannot be read (emptied, not JSON): unfinished,
    and computed again or, where their parts are whole, adopted by the next run."""
    chunks = Path(folder) / CHUNKS
    return [int(found.group(1)) for path in (sorted(chunks.iterdir()) if chunks.is_dir() else ())
            if (found := RECORD_PATTERN.fullmatch(path.name)) and _read_json(path) is None]


def finished_chunks(folder: str | Path) -> set[int]:
    """Chunks whose record exists (the record is written after both parts)."""
    return set(chunk_records(folder))


def read_manifest(folder: str | Path) -> dict | None:
    """The folder's manifest; None when there is none and nothing to rebuild it from. A missing or
    damaged manifest is rebuilt from the chunk records, which each carry the plan (marked
    `rebuilt`); a resumed run writes it back."""
    folder = Path(folder)
    manifest = _read_json(folder / MANIFEST)
    if manifest is not None and all(key in manifest for key in PLAN_KEYS):
        return manifest
    plans = [r["plan"] for r in chunk_records(folder).values() if isinstance(r.get("plan"), dict)]
    if plans and all(key in plans[0] for key in PLAN_KEYS):
        return {**plans[0], "rebuilt": True}
    if manifest is None and not (folder / MANIFEST).exists():
        return None
    raise StoreError(f"{folder / MANIFEST} is damaged and no finished chunk holds the plan to rebuild it from; "
                     "start the run over (overwrite=True)")


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
    }


def _same_sweep_file(folder: Path, sweep: Sweep) -> bool:
    """Whether the folder's sweep.toml is exactly the resolved spec of `sweep`."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return (folder / SPEC_FILE).read_text() == sweep.to_toml()
    return False


def prepare(folder: Path, sweep: Sweep, overwrite: bool) -> dict | None:
    """Check an existing folder against `sweep` (call with the lock held).

    Returns the manifest to resume from (rebuilt from the chunk records if it was lost or
    damaged), or None for a fresh folder; refuses a folder that holds a different sweep unless
    `overwrite`, which empties it."""
    if overwrite:
        for child in folder.iterdir():
            if child.name.startswith(LOCK):
                continue
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        return None
    # Listed before the manifest is read: a concurrent shard's `start` links its manifest first,
    # so whatever it lays out after that is not taken for a stranger's files by a shard that
    # found no manifest a moment earlier.
    leftovers = [c.name for c in folder.iterdir() if not c.name.startswith(".")]
    try:
        manifest = read_manifest(folder)
    except StoreError:
        if not _same_sweep_file(folder, sweep):
            raise
        (folder / MANIFEST).unlink()        # the same sweep, no chunk finished: nothing to keep
        manifest = None
    if manifest is None:
        if leftovers and not _same_sweep_file(folder, sweep):
            raise StoreError(f"{folder} is not empty and has no {MANIFEST} ({', '.join(sorted(leftovers)[:3])} ...); "
                             "choose another out folder or start over (overwrite=True)")
        _sweep_dead_temporaries(folder)
        return None
    if manifest["spec_hash"] != sweep.spec_hash():
        raise StoreError(f"{folder} holds a different sweep (spec hash {manifest['spec_hash']} there, "
                         f"{sweep.spec_hash()} now); start over (overwrite=True) or choose another out folder")
    _sweep_dead_temporaries(folder)
    return manifest


def start(folder: Path, sweep: Sweep, manifest: dict, shard: tuple[int, int] | None = None) -> dict:
    """Lay out a run folder and return the manifest in force: the first writer's (an exclusive
    link, so concurrent shards agree on one chunk plan), or `manifest` rebuilt and written back.
    Then the resolved spec and the part folders. Idempotent, so a resume repairs a start that was
    cut short. Shards of one folder must agree on N (else they would compute chunks twice): the
    first shard fixes N in `shards.json`."""
    in_force = {key: value for key, value in manifest.items() if key != "rebuilt"}
    if manifest.get("rebuilt"):
        write_file(folder / MANIFEST, _json_bytes(in_force))
    elif not write_file(folder / MANIFEST, _json_bytes(in_force), exclusive=True):
        in_force = read_manifest(folder)
    write_file(folder / SPEC_FILE, sweep.to_toml().encode())
    for name, content in sweep.folder_files().items():
        write_file(folder / name, content)
    for sub in (*tables_of(sweep), CHUNKS):
        (folder / sub).mkdir(exist_ok=True)
    if shard is not None:
        write_file(folder / SHARDS_FILE, json.dumps({"shards": shard[1]}).encode(), exclusive=True)
        fixed = (_read_json(folder / SHARDS_FILE) or {}).get("shards")
        if fixed != shard[1]:
            raise StoreError(f"{folder} is being filled by {fixed} shards, not {shard[1]}; "
                             f"use shard K/{fixed} or a plain run")
    return in_force


def write_table(path: Path, frame: pd.DataFrame, hint: str = "") -> None:
    """A whole-table result (e.g. thresholds.parquet), written durably."""
    write_file(Path(path), _parquet_bytes(frame), hint=hint)


def _part_record(data: bytes, rows: int) -> dict:
    return {"rows": rows, "bytes": len(data), "crc32": zlib.crc32(data)}


def write_chunk(folder: Path, chunk_index: int, runs: pd.DataFrame, trajectories: pa.Table | None,
                record: dict) -> dict:
    """Trajectories (None: not recorded), then runs, then the chunk's record (`record` plus each
    part's rows, bytes and CRC-32): the chunk counts as finished only once its record exists.
    Returns the record."""
    hint = f"the chunks finished before are intact; free space or fix the folder, then {RESUME}"
    parts = {}
    for table, frame in ((TRAJECTORIES, trajectories), (RUNS, runs)):
        if frame is None:
            continue
        data = _parquet_bytes(frame)
        write_file(folder / table / part_name(chunk_index), data, hint=hint)
        parts[table] = _part_record(data, len(frame))
    record = {**record, "parts": parts}
    write_file(folder / CHUNKS / record_name(chunk_index), _json_bytes(record), hint=hint)
    return record


def _checked_part(folder: Path, table: str, index: int, record: dict) -> tuple[bytes, str | None]:
    """A part's bytes and why they are not the part its chunk's record describes (missing,
    truncated, emptied or changed; None when they are)."""
    expected = record.get("parts", {}).get(table, {})
    try:
        data = (folder / table / part_name(index)).read_bytes()
    except OSError as err:
        return b"", err.strerror or str(err)
    if len(data) != expected.get("bytes"):
        return data, f"{len(data)} bytes, {expected.get('bytes')} written"
    if zlib.crc32(data) != expected.get("crc32"):
        return data, "its CRC-32 differs from the one written"
    return data, None


def _read_part(folder: Path, table: str, index: int, record: dict) -> bytes:
    """A part's bytes, checked against its chunk's record; a StoreError names a damaged part."""
    data, problem = _checked_part(folder, table, index, record)
    if problem:
        raise StoreError(damage_message(folder, folder / table / part_name(index), index, problem))
    return data


def damage_message(folder: Path, path: Path, index: int, why: str) -> str:
    return (f"{path} is damaged ({why}); {RESUME.replace('DIR', str(folder))}: it computes chunk {index} again "
            "and keeps the others")


def damaged_chunks(folder: str | Path) -> dict[int, str]:
    """index -> what is wrong, for the finished chunks whose parts do not match their records."""
    folder = Path(folder)
    damaged = {}
    for index, record in sorted(chunk_records(folder).items()):
        for table in _written_tables(record):
            problem = _checked_part(folder, table, index, record)[1]
            if problem:
                damaged[index] = f"{table}/{part_name(index)}: {problem}"
                break
    return damaged


def forget_chunk(folder: Path, index: int) -> None:
    """Remove a damaged chunk's record, then its parts, so that the chunk counts as unfinished
    and is computed again (its parts, which no longer match any record, are not adopted)."""
    (folder / CHUNKS / record_name(index)).unlink(missing_ok=True)
    for table in (RUNS, TRAJECTORIES):
        (folder / table / part_name(index)).unlink(missing_ok=True)


def adopt_parts(folder: Path, manifest: dict, chunks, tables: tuple[str, ...] = (TRAJECTORIES, RUNS)) -> list[int]:
    """Record the chunks of `chunks` (Chunk(index, start, stop)) whose parts of `tables` (the
    sweep's, `tables_of`) are whole but whose record is missing (a run stopped between its last
    part and the record, or a lost `chunks/` folder): every part is read in full and the runs
    part must hold exactly the chunk's run ids. Returns the indices adopted."""
    adopted = []
    for chunk in chunks:
        paths = {table: folder / table / part_name(chunk.index) for table in tables}
        if not all(p.exists() for p in paths.values()):
            continue
        try:
            data = {table: p.read_bytes() for table, p in paths.items()}
            tables = {table: pq.read_table(io.BytesIO(d)) for table, d in data.items()}
            run_ids = tables[RUNS].column("run_id").to_numpy()
        except (OSError, pa.ArrowException, KeyError):
            continue
        if not np.array_equal(np.sort(run_ids), np.arange(chunk.start, chunk.stop)):
            continue
        record = {"runs": [chunk.start, chunk.stop], "adopted": True, "plan": plan_of(manifest),
                  "parts": {t: _part_record(data[t], tables[t].num_rows) for t in tables}}
        write_file(folder / CHUNKS / record_name(chunk.index), _json_bytes(record))
        adopted.append(chunk.index)
    return adopted


def plan_of(manifest: dict) -> dict:
    """The part of a manifest that a chunk record carries, enough to rebuild the manifest."""
    return {key: manifest[key] for key in PLAN_KEYS}


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


def said_partial(folder: str | Path, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame`, read from `folder`, with `attrs["partial"]` its partial note ("" when complete)
    and, where the folder is partial, a DlsweepWarning saying so (the public readers)."""
    note = partial_note(folder) or ""
    frame.attrs["partial"] = note
    if note:
        warnings.warn(f"{folder}: {note}; the table holds the finished chunks' runs only", DlsweepWarning, stacklevel=3)
    return frame


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
                 records: tuple[np.ndarray, dict], record_steps: np.ndarray) -> tuple[pd.DataFrame, pa.Table | None]:
    """The tidy tables of one chunk: one row per trajectory (a DataFrame), one per (trajectory,
    recorded step) up to the step where the trajectory stopped, that step included (an Arrow
    table, or None where the sweep records no trajectories; its values in the sweep's dtype as computed: float32 for a float32 sweep, half the
    bytes to write; `load_trajectories` reads them as float64), with the loss and every
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

    if not sweep.record.trajectories:
        return pd.DataFrame(runs), None
    loss, observed = records
    steps, steps_run = np.asarray(record_steps, np.int64), runs["steps_run"]
    rows = _TrajectoryRows.of(steps, steps_run)
    trajectories = {"run_id": np.repeat(runs["run_id"], rows.counts),
                    "step": rows.take(np.minimum(steps[None, :], steps_run[:, None])), "loss": rows.take(loss.T)}
    for name, values in observed.items():
        if values.ndim == 2:                                        # (R, B): a scalar per step
            trajectories[name] = rows.take(values.T)
        else:                                                       # (R, B, n): a vector per step
            for i in range(values.shape[2]):
                trajectories[f"{name}_{i}"] = rows.take(values[:, :, i].T)
    return pd.DataFrame(runs), pa.table(trajectories)


@dataclasses.dataclass(frozen=True)
class _TrajectoryRows:
    """Which records of a chunk become rows of its trajectories table, by run then step. A
    trajectory that stopped at steps_run is frozen: the first record after its stop holds its
    state at steps_run and is shown at that step; the (identical) records after it are dropped.
    So a run's rows are a prefix of the schedule, `counts` of them: its run id repeated, and no
    mask at all where every run reached the last record. 100k toy trajectories x 149 records,
    all to the end: the table built in 0.20 s against 0.38 s with masks everywhere
    (one core), the same table."""

    counts: np.ndarray          # (B,) rows per run
    shown: np.ndarray | None    # (B, R) which records are rows; None: all of them

    @classmethod
    def of(cls, steps: np.ndarray, steps_run: np.ndarray) -> "_TrajectoryRows":
        """The rows of runs stopped at `steps_run` (B,) recorded at `steps` (R,)."""
        previous = np.concatenate([[-1], steps[:-1]])
        counts = np.searchsorted(previous, steps_run, side="left")      # records with previous < steps_run
        return cls(counts, np.arange(len(steps))[None, :] < counts[:, None] if (counts < len(steps)).any() else None)

    def take(self, by_run: np.ndarray) -> np.ndarray:
        """The rows' values of a (B, R) array: the shown ones, by run then step."""
        return by_run.reshape(-1) if self.shown is None else by_run[self.shown]


def load(folder: str | Path, chunks=None, columns: list[str] | None = None) -> pd.DataFrame:
    """The runs table of a dataset (finished chunks, or those of them in `chunks`; every column,
    or those of `columns` present), sorted by run_id, with tidy dtypes."""
    frame = _read_parts(Path(folder), RUNS, chunks, columns)
    ints = [c for c in frame.columns if c in ("run_id", *INTEGER_HPS, "steps_run") or c.startswith("hit_")]
    frame = frame.astype({c: "int64" for c in ints} | {c: "bool" for c in ("diverged", "converged") if c in frame})
    return frame.sort_values("run_id", ignore_index=True) if "run_id" in frame else frame


def records_trajectories(folder: Path) -> bool:
    """Whether the folder's finished chunks wrote trajectories (True while none is finished)."""
    records = chunk_records(folder)
    return not records or any(TRAJECTORIES in _written_tables(record) for record in records.values())


def load_trajectories(folder: str | Path) -> pd.DataFrame:
    """The trajectories table (one row per run and recorded step) of finished chunks, sorted by
    run_id and step, every value column as float64 (float32 sweeps store float32). A StoreError
    for a folder whose sweep recorded none (`[record] trajectories = false`)."""
    folder = Path(folder)
    if not records_trajectories(folder):
        raise StoreError(f"{folder}: no trajectories table: its sweep sets [record] trajectories = false "
                         f"({folder / SPEC_FILE}); run it again without that key, into another folder, to record them")
    frame = _read_parts(folder, TRAJECTORIES)
    frame = frame.astype({c: np.float64 for c in frame.columns if frame[c].dtype == np.float32})
    return frame.sort_values(["run_id", "step"], ignore_index=True)


def _read_parts(folder: Path, table: str, chunks=None, columns: list[str] | None = None) -> pd.DataFrame:
    """The parts of `table` of the finished chunks (those of `chunks`), each checked against its
    record, concatenated."""
    records = chunk_records(folder)
    if chunks is not None:
        records = {index: records[index] for index in chunks if index in records}
    if not records:
        if read_manifest(folder) is None:
            raise StoreError(f"{folder}: no finished chunks in {table}/ (is this a dlsweep run folder?)")
        unreadable = unreadable_records(folder)
        named = (f" (the record{'s' if len(unreadable) > 1 else ''} of chunk{'s' if len(unreadable) > 1 else ''} "
                 f"{', '.join(map(str, unreadable))} {'are' if len(unreadable) > 1 else 'is'} unreadable)") if unreadable else ""
        raise StoreError(f"{folder}: no finished chunk{named}; {RESUME.replace('DIR', str(folder))}")
    frames = []
    for index, record in sorted(records.items()):
        data = _read_part(folder, table, index, record)
        try:
            parquet = pq.ParquetFile(io.BytesIO(data))
            kept = None if columns is None else [c for c in columns if c in parquet.schema_arrow.names]
            frames.append(parquet.read(columns=kept).to_pandas())
        except pa.ArrowException as err:
            raise StoreError(damage_message(folder, folder / table / part_name(index), index, str(err))) from None
    return pd.concat(frames, ignore_index=True)
