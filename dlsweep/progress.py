"""Progress reporting on the host side: a tqdm bar on a terminal, else one ETA line after the
first chunk (or nothing).

The engine's results are copied to the host before the meter is told, so its rates are correct
under JAX's asynchronous dispatch.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable


def human_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Quiet:
    """No bar (output is not a terminal, or progress was turned off): after the first chunk, one
    line to `say` with the time left, extrapolated from that chunk's trajectories per second."""

    def __init__(self, total_runs: int, total_chunks: int, say: Callable[[str], None] | None = None):
        self.total_runs, self.total_chunks, self.say = total_runs, total_chunks, say
        self.started = time.perf_counter()
        self.runs, self.chunks = 0, 0

    def update(self, runs: int, traj_steps: int) -> None:
        self.runs += runs
        self.chunks += 1
        if self.chunks == 1 and self.chunks < self.total_chunks and self.say is not None:
            elapsed = time.perf_counter() - self.started
            left = elapsed * (self.total_runs - self.runs) / self.runs
            finish = time.strftime("%H:%M", time.localtime(time.time() + left))
            self.say(f"first chunk: {runs} trajectories in {elapsed:.3g} s; {self.total_chunks - 1} chunk(s) left, "
                     f"about {human_seconds(left)} (ETA {finish})")

    def close(self) -> None:
        pass


class Bar(Quiet):
    """tqdm bar on stderr: trajectories done, chunks, trajectory-steps/s, ETA."""

    def __init__(self, total_runs: int, total_chunks: int, say: Callable[[str], None] | None = None):
        from tqdm import tqdm

        super().__init__(total_runs, total_chunks, say)
        self.traj_steps = 0
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


def meter(total_runs: int, total_chunks: int, enabled: bool | None = None,
          say: Callable[[str], None] | None = None) -> Quiet:
    """A bar when `enabled`, or (None) when stderr is a terminal; otherwise quiet, but for the ETA
    line to `say`."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    return (Bar if enabled else Quiet)(total_runs, total_chunks, say)
