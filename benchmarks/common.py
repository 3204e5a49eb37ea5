"""Shared pieces: the toy problem, a wall + CPU timer, machine information."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

SIGMA_STAR = (12.0, 6.0, 4.0, 3.0)
LEVELS = (0.05, 0.5, 0.95)        # dlsweep's default hitting levels
DEPTHS = (1, 2, 3, 4, 5, 6)
SIGMA0_LOG10 = (-6.0, -1.0)       # log10 range of sigma0; with stop.rel_loss = 0 nothing stops early
LR = 1e-3


@dataclasses.dataclass
class Timing:
    wall: float = 0.0
    cpu: float = 0.0   # process CPU time (all threads), user + system


@contextlib.contextmanager
def timed():
    """Wall (perf_counter) and process CPU time (process_time) of the block."""
    t = Timing()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield t
    finally:
        t.wall = time.perf_counter() - wall
        t.cpu = time.process_time() - cpu


@dataclasses.dataclass
class Problem:
    """The sweep's grid, flattened in dlsweep's order (depth-major, then sigma0, then lr)."""

    n_sigma0: int
    steps: int
    sigma0_log10: tuple[float, float] = SIGMA0_LOG10

    @property
    def n(self) -> int:
        return len(DEPTHS) * self.n_sigma0

    @property
    def sigma0_values(self) -> np.ndarray:
        return np.logspace(*self.sigma0_log10, self.n_sigma0)

    def columns(self) -> dict[str, np.ndarray]:
        depth, sigma0 = np.meshgrid(np.asarray(DEPTHS, np.int64), self.sigma0_values, indexing="ij")
        return {"depth": depth.reshape(-1), "sigma0": sigma0.reshape(-1), "lr": np.full(self.n, LR)}

    def sample(self, m: int) -> np.ndarray:
        """m run ids spread evenly over the grid, so every depth and the sigma0 range are covered."""
        m = max(1, min(m, self.n))
        return np.unique(np.rint(np.linspace(0, self.n - 1, m)).astype(np.int64))


def compare_hits(name: str, theirs: np.ndarray, ours: np.ndarray, horizon: int | None = None) -> str:
    """How many of a baseline's first-hitting steps equal dlsweep's (both (m, k, levels), -1 =
    never). With `horizon` (the baseline ran only that many steps) just the entries that either
    side reached by then are compared."""
    mask = np.ones(ours.shape, bool) if horizon is None else (theirs >= 0) | ((ours >= 0) & (ours <= horizon))
    diff = np.abs(ours - theirs)[mask]
    never = int(((ours < 0) != (theirs < 0))[mask].sum())
    within = "" if horizon is None else f" reached within {horizon} steps"
    return (f"{name}: {int((diff == 0).sum())} of {diff.size} first-hitting steps{within} identical to dlsweep's "
            f"(max |difference| {int(diff.max(initial=0))} steps; hit in one and not the other: {never})")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return " ".join(f for f in ("avx2", "fma", "avx512f") if f in flags)
    except OSError:
        pass
    return ""


def cache_sizes() -> str:
    base = "/sys/devices/system/cpu/cpu0/cache"
    parts = []
    try:
        for index in sorted(os.listdir(base)):
            d = os.path.join(base, index)
            try:
                level = open(os.path.join(d, "level")).read().strip()
                kind = open(os.path.join(d, "type")).read().strip()
                size = open(os.path.join(d, "size")).read().strip()
            except OSError:
                continue
            if kind == "Instruction":
                continue
            parts.append(f"L{level} {size}")
    except OSError:
        pass
    return ", ".join(parts)


def accelerator() -> str | None:
    """The kind of the first local device when JAX runs on an accelerator (e.g. "NVIDIA H100 80GB
    HBM3"), else None: a benchmark run there writes sections of their own, titled with it."""
    import jax

    return None if jax.default_backend() == "cpu" else jax.devices()[0].device_kind


def on_device(title: str) -> str:
    """A section title, with the accelerator named where one runs the benchmark."""
    device = accelerator()
    return title if device is None else f"{title}, on one {device}"


def on_cores(title: str) -> str:
    """`on_device`, and on CPU with the count of its devices past one (`engine.use_cpu_cores`: one
    per core the process may use), so a one-core table and a whole-machine one stand side by side."""
    import jax

    cores = len(jax.devices("cpu"))
    return on_device(title if accelerator() or cores == 1 else f"{title}, on {cores} CPU cores")


def machine_info(module: str = "benchmarks") -> dict[str, str]:
    import jax
    import jaxlib
    import pandas

    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    try:
        load = " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        load = "?"
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpu": cpu_model(),
        "cpu flags": cpu_flags(),
        "caches (per core)": cache_sizes(),
        "cores online": str(os.cpu_count()),
        "cores this process may use (affinity)": f"{len(affinity)} ({','.join(map(str, affinity))})",
        "load average at start": load,
        "python": f"{platform.python_version()} ({sys.executable})",
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", "(unset)"),
        "jax / jaxlib": f"{jax.__version__} / {jaxlib.__version__} ({jax.default_backend()})",
        **({"accelerator": f"{len(jax.local_devices())} x {accelerator()}"} if accelerator() else {}),
        "numpy / pandas": f"{np.__version__} / {pandas.__version__}",
        "command": command_line(module),
    }


def command_line(module: str = "benchmarks") -> str:
    """The command as it was typed (`python -m <module> ...`), as near as Python can tell: the
    module Python ran when it is one of this package (so a section run by `python -m benchmarks`
    shows that command), else `module`; taskset is not visible from inside, so it is added when
    the affinity is a single core."""
    script = Path(sys.argv[0])
    if script.parent == Path(__file__).parent and script.suffix == ".py":
        module = "benchmarks" if script.stem == "__main__" else f"benchmarks.{script.stem}"
    args = " ".join(shlex.quote(a) for a in sys.argv[1:])
    cmd = f"python -m {module} {args}".strip()
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) == 1:
        cmd = f"taskset -c {next(iter(os.sched_getaffinity(0)))} {cmd}"
    return cmd
