"""Progress reporting on the host side: a no-op meter and a tqdm bar.

The engine's results are copied to the host before the meter is told, so its rates are correct
under JAX's asynchronous dispatch.
"""

from __future__ import annotations

import shutil
import sys
import time


class Quiet:
    """Reports nothing (output is not a terminal, or progress was turned off)."""

    def __init__(self, total_runs: int, total_chunks: int):
        self.total_runs, self.total_chunks = total_runs, total_chunks

    def update(self, runs: int, traj_steps: int) -> None:
        pass

    def close(self) -> None:
        pass


class Bar(Quiet):
    """tqdm bar on stderr: trajectories done, chunks, trajectory-steps/s, ETA."""

    def __init__(self, total_runs: int, total_chunks: int):
        from tqdm import tqdm

        super().__init__(total_runs, total_chunks)
        self.chunks, self.traj_steps, self.started = 0, 0, time.perf_counter()
        size = shutil.get_terminal_size(fallback=(100, 24))   # a 0x0 pseudo-terminal falls back too
        self.bar = tqdm(total=total_runs, unit="traj", file=sys.stderr, ncols=size.columns, nrows=size.lines,
                        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} traj [{elapsed}<{remaining}{postfix}]")
        self.bar.set_postfix_str(f"chunk 0/{total_chunks}")

    def update(self, runs: int, traj_steps: int) -> None:
        self.chunks += 1
        self.traj_steps += traj_steps
        rate = self.traj_steps / max(time.perf_counter() - self.started, 1e-9)
        self.bar.set_postfix_str(f"chunk {self.chunks}/{self.total_chunks}, {rate:.3g} traj-steps/s", refresh=False)
        self.bar.update(runs)

    def close(self) -> None:
        self.bar.close()


def meter(total_runs: int, total_chunks: int, enabled: bool | None = None) -> Quiet:
    """A bar when `enabled`, or (None) when stderr is a terminal; otherwise quiet."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    return (Bar if enabled else Quiet)(total_runs, total_chunks)
