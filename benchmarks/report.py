"""The results as Markdown."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Row:
    method: str
    measured: str             # what was timed
    traj_steps: int           # trajectory-steps in the timed part
    wall: float
    cpu: float
    compile_wall: float | None = None
    extrapolated: bool = False

    @property
    def rate(self) -> float:
        return self.traj_steps / self.wall if self.wall > 0 else float("nan")

    @property
    def cpu_rate(self) -> float:
        return self.traj_steps / self.cpu if self.cpu > 0 else float("nan")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"


def _ratio(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:.3g}"
    return f"{x:.2g}"


def table(rows: list[Row], reference: Row, whole: Row, full_traj_steps: int) -> str:
    """Markdown table; ratios are dlsweep's compute throughput (`reference`) and its whole-call
    throughput (`whole`) over each row's, both by wall time."""
    head = ("| method | timed | compile (wall) | wall | CPU | traj-steps/s (wall) | traj-steps/s (CPU) "
            "| dlsweep run ÷ this | dlsweep whole ÷ this | full sweep at this rate |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        compile_s = f"{r.compile_wall:.2f} s" if r.compile_wall is not None else "—"
        full = full_traj_steps / r.rate
        full_s = _duration(full) + (" (extrapolated)" if r.extrapolated else "")
        lines.append(
            f"| {r.method} | {r.measured} | {compile_s} | {r.wall:.3f} s | {r.cpu:.3f} s | {r.rate:.3g} | {r.cpu_rate:.3g} "
            f"| {_ratio(reference.rate / r.rate)} | {_ratio(whole.rate / r.rate)} | {full_s} |")
    return "\n".join(lines)


def info_block(info: dict[str, str]) -> str:
    return "\n".join(f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}" for k, v in info.items())
