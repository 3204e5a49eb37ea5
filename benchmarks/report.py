"""The results as Markdown."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path


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


def table(rows: list[Row], reference: Row, whole: Row | None, full_traj_steps: int) -> str:
    """Markdown table; ratios are dlsweep's compute throughput (`reference`) and, when given, its
    whole-call throughput (`whole`) over each row's, both by wall time."""
    head = ("| method | timed | compile (wall) | wall | CPU | traj-steps/s (wall) | traj-steps/s (CPU) "
            "| dlsweep run ÷ this |" + (" dlsweep whole ÷ this |" if whole else "") + " full sweep at this rate |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        compile_s = f"{r.compile_wall:.2f} s" if r.compile_wall is not None else "—"
        full = full_traj_steps / r.rate
        full_s = _duration(full) + (" (extrapolated)" if r.extrapolated else "")
        whole_s = f" {_ratio(whole.rate / r.rate)} |" if whole else ""
        lines.append(
            f"| {r.method} | {r.measured} | {compile_s} | {r.wall:.3f} s | {r.cpu:.3f} s | {r.rate:.3g} | {r.cpu_rate:.3g} "
            f"| {_ratio(reference.rate / r.rate)} |{whole_s} {full_s} |")
    return "\n".join(lines)


def write_section(path: Path, markdown: str) -> None:
    """Put `markdown`, which opens with a top-level `# ` heading, into the file at `path`: in place
    of the section with the same heading (up to the next top-level heading), else appended; the
    other sections are kept as they are."""
    title = markdown.splitlines()[0]
    old = path.read_text() if path.exists() else ""
    sections = [s.rstrip("\n") for s in re.split(r"(?m)^(?=# )", old) if s.strip()]
    new = markdown.rstrip("\n")
    if any(s.splitlines()[0] == title for s in sections):
        sections = [new if s.splitlines()[0] == title else s for s in sections]
    else:
        sections.append(new)
    path.write_text("\n\n".join(sections) + "\n")


def info_block(info: dict[str, str]) -> str:
    return "\n".join(f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}" for k, v in info.items())
