"""The gallery of the reproductions: their figures copied into `docs/figures/` under one flat
name each, and the table that shows them beside the papers' (`docs/gallery.md`, and the README's
section between `START` and `END` where the README has them)."""

from __future__ import annotations

import json
import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

START, END = "<!-- gallery: start -->", "<!-- gallery: end -->"
THUMBNAIL_WIDTH = 220          # pixels of a figure's thumbnail in the table
COLUMNS = ("paper figure", "command", "time", "our figure", "what matches and what differs")


@dataclass(frozen=True)
class Row:
    """One reproduction as the gallery shows it: the paper's figure, the command, its wall time,
    its figures (as published) and what matches and what differs."""

    name: str
    paper: str
    seconds: float | None           # None: not run this time
    figures: tuple[Path, ...]
    verdict: str
    timing: str = ""                # where `seconds` was measured, when not in this run


def published_name(figure: Path, run_root: Path, name: str) -> str:
    """A figure's flat name in docs/figures: the reproduction's name, then its path below the
    reproduction's folder without the `figures` folders (`gissin-fig5/bias/figures/a.png` ->
    `gissin-fig5-bias-a.png`)."""
    parts = [p for p in figure.relative_to(run_root).parts if p != "figures"]
    return "-".join([name, *parts])


def publish(figures: list[Path], run_root: Path, name: str, docs: Path,
            earlier: tuple[Path, ...] = ()) -> tuple[Path, ...]:
    """Copy a reproduction's figures into `docs/figures/` (`published_name`), replacing the
    earlier copies of the same name and removing those of its `earlier` figures (as published
    before, relative to `docs`'s parent) that it no longer draws, so that docs/figures holds the
    current results only; the copies, relative to `docs`'s parent."""
    target = docs / "figures"
    target.mkdir(parents=True, exist_ok=True)
    copies = []
    for figure in figures:
        copy = target / published_name(figure, run_root, name)
        shutil.copyfile(figure, copy)
        copies.append(copy.relative_to(docs.parent))
    for stale in set(earlier) - set(copies):
        (docs.parent / stale).unlink(missing_ok=True)
    return tuple(copies)


def machine() -> str:
    """This machine's CPU, as the time column names it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def table(rows: list[Row], cpu: str, base: Path = Path(".")) -> str:
    """The gallery as a Markdown table, one row per reproduction: a PNG's thumbnail links to the
    full-size PNG, and its other formats are linked beside it; links relative to `base` (the
    folder of the page, against that of the rows' figure paths)."""
    def link(figure: Path) -> str:
        return Path(os.path.relpath(figure, base)).as_posix()

    lines = [f"Times: wall, full size, each reproduction run once on {cpu} (by `dlsweep reproduce --all` or "
             "alone), its compile cache empty at the start.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        shown = []
        for png in (f for f in row.figures if f.suffix == ".png"):
            others = [f for f in row.figures if f.stem == png.stem and f.suffix != ".png"]
            links = "".join(f" [{f.suffix[1:]}]({link(f)})" for f in others)
            shown.append(f'<a href="{link(png)}"><img src="{link(png)}" width="{THUMBNAIL_WIDTH}"></a>{links}')
        seconds = ("not measured" if row.seconds is None else f"{row.seconds:.0f} s" if row.seconds < 600
                   else f"{row.seconds / 60:.0f} min")
        cells = (row.paper, f"`dlsweep reproduce {row.name}`", f"{seconds}{row.timing}", "<br>".join(shown),
                 row.verdict.replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


RECORD = "gallery.json"          # in docs/: each published reproduction's time, CPU and figures


def _recorded(docs: Path) -> dict[str, dict]:
    """`RECORD`'s entries, by reproduction (none where it is missing or unreadable)."""
    try:
        return json.loads((docs / RECORD).read_text())
    except (OSError, ValueError):
        return {}


def earlier(docs: Path) -> dict[str, Row]:
    """The rows published before (`RECORD`), by reproduction, each time marked with the CPU it was
    measured on where that is not this machine's."""
    cpu = machine()
    return {name: Row(name, entry["paper"], entry["seconds"], tuple(Path(f) for f in entry["figures"]), "",
                      "" if entry["cpu"] == cpu else f" (on {entry['cpu']})")
            for name, entry in _recorded(docs).items()}


def write(rows: list[Row], docs: Path, readme: Path | None = None) -> list[Path]:
    """`docs/gallery.md`, `RECORD` (the rows run now, with this machine's CPU; the others as they
    were) and the README's section between `START` and `END` where it has them (it is left alone
    otherwise); the files written."""
    cpu = machine()
    record, entries = docs / RECORD, _recorded(docs)
    for row in rows:
        if not row.timing:
            entries[row.name] = {"paper": row.paper, "seconds": row.seconds, "cpu": cpu,
                                 "figures": [f.as_posix() for f in row.figures]}
    record.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    gallery = docs / "gallery.md"
    gallery.write_text("# Gallery: the papers' figures, reproduced\n\n" + table(rows, cpu, Path(docs.name)))
    written = [gallery, record]
    if readme is not None and readme.exists():
        content = readme.read_text()
        if START in content and END in content:
            before, rest = content.split(START, 1)
            readme.write_text(f"{before}{START}\n{table(rows, cpu)}{END}{rest.split(END, 1)[1]}")
            written.append(readme)
    return written
