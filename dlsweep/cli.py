"""Command line: `dlsweep run | submit | thresholds | pcs | plot | reproduce | show | models`, a
thin shell over `dlsweep.api`.

The library's messages name an option as its Python parameter (`overwrite=True`,
`chunk_size=0`); `main` prints them with the option's flag instead (`--overwrite`,
`--chunk-size 0`), from the table of the parser's options (`option_flags`).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import sys
import textwrap
import warnings
from pathlib import Path

from dlsweep import __version__, interrupt
from dlsweep.errors import PlotError, SpecError, StoreError, ThresholdError
from dlsweep.figures import FORMATS, PLOT_KINDS, TIMES
from dlsweep.warning import DlsweepWarning

INTERRUPTED = "dlsweep: interrupted"
RESUMABLE = ("run", "reproduce")          # verbs whose interrupted work the next call resumes
# The library (JAX, pandas) is imported once the command line is parsed, inside `main`'s Ctrl-C
# handling: `dlsweep --help` and a mistyped command answer at once.

DESCRIPTION = ("Sweeps of gradient-descent trajectories in deep linear models, each grid run as one compiled JAX "
               "program into a Parquet dataset; thresholds of incremental learning, figures and reproductions "
               "of paper figures from it.")


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, wrapped without breaking words at hyphens (paths like runs/hacohen-fig4)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(text, width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlsweep", description=DESCRIPTION, formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"dlsweep {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
        """A verb with its one-line summary in the list of verbs and a whole sentence in its --help."""
        return verbs.add_parser(name, help=summary, description=description or f"{summary[0].upper()}{summary[1:]}.",
                                formatter_class=_HelpFormatter)

    run = verb("run", "run a sweep spec into a Parquet dataset folder")
    run.add_argument("spec", help="sweep TOML file, e.g. sweeps/toy-threshold.toml")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a spec key (TOML value), e.g. --set steps=20000 --set axes.lr=[1e-3]")
    run.add_argument("--out", help="dataset folder (default runs/<name>)")
    run.add_argument("--chunk-size", type=int, help="trajectories per compiled call (default: from memory and cache "
                     "estimates); each call computes whole blocks of 64 trajectories, so a smaller size costs as much "
                     "as 64")
    run.add_argument("--max-chunks", type=int, help="stop after this many chunks; run again to fill the rest")
    run.add_argument("--overwrite", action="store_true", help="empty the folder and start over")
    run.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    run.add_argument("--shard", type=_shard, metavar="K/N",
                     help="run only shard K of N (chunks K-1, K-1+N, ...); the N shards share the folder")
    run.add_argument("--dry-run", action="store_true",
                     help="print the plan (axes, trajectories, chunks, compile groups, disk) and write nothing")

    sub = verb("submit", "run a sweep as N shards through submitit (Slurm job array or local)")
    sub.add_argument("spec", help="sweep TOML file")
    sub.add_argument("--shards", type=int, required=True, help="number of shards (jobs)")
    sub.add_argument("--executor", choices=("local", "slurm"), default="local",
                     help="local processes on this machine (default) or a Slurm job array")
    sub.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a spec key (TOML value), as for run")
    sub.add_argument("--out", metavar="DIR", help="dataset folder (default runs/<name>)")
    sub.add_argument("--chunk-size", type=int, help="trajectories per chunk (default: from memory and cache estimates)")
    sub.add_argument("--partition", help="Slurm partition")
    sub.add_argument("--gpus-per-task", type=int, help="GPUs per job")
    sub.add_argument("--cpus-per-task", type=int, help="CPUs per job")
    sub.add_argument("--mem-gb", type=float, help="memory per job, GB")
    sub.add_argument("--time", type=int, default=60, help="time limit per job, minutes (default 60)")
    sub.add_argument("--wait", action="store_true", help="wait for Slurm jobs too (local jobs are always waited for)")

    th = verb("thresholds", "sigma0 thresholds of (s, f)-incremental learning, with theory",
              "The largest sigma0 at which learning is (s, f)-incremental (Gissin et al. 2020, Definition 1), "
              "for every pair of targets and every cell of the other axes, beside the exact gradient-flow "
              "threshold and the bounds of Theorems 2 and 3; written to DIR/thresholds.parquet.")
    th.add_argument("folder", help="a run folder, e.g. runs/toy-threshold")
    th.add_argument("--s", type=float, default=0.05, help="level s of Definition 1, in (0, 0.25) (default 0.05)")
    th.add_argument("--f", type=float, default=0.95, help="level f of Definition 1, in (0.75, 1) (default 0.95)")
    th.add_argument("--pairs", default="adjacent", type=_pairs,
                    help="adjacent (default), all, or explicit pairs i-j like 0-1,0-3")
    th.add_argument("--method", choices=("grid", "bisect"), default="grid",
                    help="grid: read off the sigma0 axis; bisect: refine by sub-grids in ln sigma0 run through the engine")
    th.add_argument("--rtol", type=float, default=1e-4, help="bisect: relative width of the final bracket")
    th.add_argument("--out", metavar="FILE", help="write the table here (.parquet; default DIR/thresholds.parquet, "
                                                  "needed when the run folder is read-only)")

    pc = verb("pcs", "per principal direction (linear_net): the spread over seeds, or convergence rates",
              "Per principal direction j of the data (model linear_net): the mean and standard deviation over "
              "seeds of the distance to the optimum along j, at the last step every seed recorded, or with "
              "--rates the fitted convergence rates beside eq. 10's prediction (Hacohen & Weinshall).")
    pc.add_argument("folder", help="a run folder of linear_net, e.g. runs/hacohen-fig4/natural")
    pc.add_argument("--rates", action="store_true",
                    help="measured convergence rates beside eq. 10's prediction (default: mean and std over seeds)")
    pc.add_argument("-o", "--out", metavar="FILE", help="write the whole table here (.csv or .parquet)")

    pl = verb("plot", "draw a figure of a run (also saved under DIR/figures/)",
              "Draw one figure of a run folder into DIR/figures/ (and at --out). Its title names every setting "
              "held fixed (the axes not drawn, steps, dtype; s and f where they matter), and a figure of a "
              "partial run says so.")
    pl.add_argument("folder", help="a run folder")
    pl.add_argument("--kind", choices=PLOT_KINDS, default=None, metavar="KIND",
                    help=f"one of {', '.join(PLOT_KINDS)} (default: the heatmap, the phase diagram over sigma0 x "
                         "depth, where the task has targets; else the model's own figure, e.g. trajectories); "
                         "help(dlsweep.api.plot_run) describes each")
    pl.add_argument("--x", help="heatmap x axis (default sigma0; --x r --y depth maps the thresholds); "
                                "trajectories: the axis across panel columns (default depth)")
    pl.add_argument("--y", help="heatmap y axis (default depth); trajectories: the axis down panel rows (default sigma0)")
    pl.add_argument("--color", help="heatmap colour: status (default), log_hit_ratio, or a runs column (population_error, "
                                    "l1_l2_position, ...); summary: the axis of one line each (default shape)")
    pl.add_argument("--pair", type=_pairs, help="the pair i-j for heatmaps and guides (default: the two largest targets)")
    pl.add_argument("--s", type=float, default=0.05, help="level s of Definition 1 (default 0.05)")
    pl.add_argument("--f", type=float, default=0.95, help="level f of Definition 1 (default 0.95)")
    pl.add_argument("-o", "--out", metavar="FILE", help="also write the figure here (.png, .pdf or .svg)")
    pl.add_argument("--title", help="a title over the figure, above the settings it names")
    pl.add_argument("--at", type=_at, help="draw at these values of other axes, e.g. depth=3 or depth=3,lr=0.01")
    pl.add_argument("--format", type=_formats, default=("png",), metavar="LIST",
                    help="the formats written under DIR/figures/: png (200 dpi), pdf, svg, comma-separated (default png)")
    pl.add_argument("--facet", metavar="AXIS", help="heatmap of a runs column: one panel per value of this axis "
                                                   "(e.g. depth), side by side on one colour scale; observables: a "
                                                   "column of panels per value")
    pl.add_argument("--time", choices=TIMES, help="observables: the time axis: step (default), eta (eta x step) or "
                                                  "rescaled (eta x step / ln(1/sigma0), Gidel et al.'s t / delta)")

    rp = verb("reproduce", "run a bundled reproduction of a paper figure",
              "Run a bundled reproduction of a paper figure: its sweep, thresholds and figures, into "
              "--out-root/NAME (or NAME-quick). --list shows each one with its measured time.")
    rp.add_argument("name", nargs="?", help="e.g. gissin-depth-separation (see --list)")
    rp.add_argument("--list", action="store_true",
                    help="list the reproductions, their paper figures and measured times")
    rp.add_argument("--quick", action="store_true", help="a small version (--list shows its time)")
    rp.add_argument("--out-root", default="runs", metavar="DIR", help="where run folders go (default runs/)")
    rp.add_argument("--format", type=_formats, default=("png",), metavar="LIST",
                    help="the figures' formats: png (200 dpi), pdf, svg, comma-separated (default png)")
    rp.add_argument("--all", action="store_true",
                    help="run every reproduction; at full size, copy their figures into --docs/figures and "
                         "rewrite the gallery (--docs/gallery.md and the README's gallery section)")
    rp.add_argument("--docs", default="docs", metavar="DIR", help="with --all: the docs folder (default docs/)")
    rp.add_argument("--skip", type=lambda text: tuple(text.split(",")), default=(), metavar="LIST",
                    help="with --all: reproductions not to run (comma-separated); the gallery keeps their figures")

    show = verb("show", "summary of a finished or partial run folder")
    show.add_argument("folder", help="a run folder")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")

    verb("models", "list the model families")
    return parser


def _run(args) -> int:
    from dlsweep import api

    if args.dry_run:
        plan = api.plan_run(args.spec, out=args.out, overrides=args.overrides, chunk_size=args.chunk_size,
                            overwrite=args.overwrite, max_chunks=args.max_chunks, shard=args.shard)
        print("\n".join(plan.lines()))
        return 0
    report = api.run(args.spec, out=args.out, overrides=args.overrides, chunk_size=args.chunk_size,
                     overwrite=args.overwrite, progress_bar=False if args.no_progress else None,
                     max_chunks=args.max_chunks, shard=args.shard, say=_say)
    if report.chunks_run:
        print(f"{report.folder}: ran {report.chunks_run} chunk(s) "
              f"({report.traj_steps:.3g} trajectory-steps) in {report.run_seconds:.2f} s "
              f"= {report.traj_steps_per_second:.3g} traj-steps/s; compile {report.compile_seconds:.2f} s")
    if report.chunks_skipped:
        print(f"{report.folder}: {report.chunks_skipped} chunk(s) were already finished (resumed)")
    print(_ended(report))
    return 0


def _ended(report) -> str:
    """The last line of a run: its folder's trajectories, whether complete, and how they ended."""
    status = "complete" if report.chunks_missing == 0 else f"{report.chunks_missing} chunk(s) still missing"
    outcome = report.outcome
    ended = "" if outcome is None else (f"; {outcome.counts()}" if report.chunks_missing == 0 else
                                        f"; of the {outcome.runs} finished: {outcome.counts()}")
    return f"{report.folder}: {report.n_runs} trajectories, {status}{ended}"


def _say(line: str) -> None:
    """A line of a run in progress, flushed: a log file shows it while the run goes on."""
    print(line, flush=True)


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N like 2/8, got {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N, got {text!r}")
    return k, n


def _at(text: str) -> dict[str, float]:
    """`--at depth=3,lr=0.01` -> {"depth": 3.0, "lr": 0.01}."""
    values = {}
    for part in text.split(","):
        axis, _, value = part.partition("=")
        try:
            values[axis.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected AXIS=VALUE[,AXIS=VALUE...], got {text!r}") from None
    return values


def _formats(text: str) -> tuple[str, ...]:
    """`--format png,pdf` -> ("png", "pdf"), each a figure format."""
    formats = tuple(part.strip().lower().lstrip(".") for part in text.split(","))
    if any(f not in FORMATS for f in formats):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(FORMATS)}; got {text!r}")
    return formats


def _pairs(text: str):
    if text in ("adjacent", "all"):
        return text
    try:
        return [tuple(int(v) for v in item.split("-", 1)) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected adjacent, all, or pairs like 0-1,1-2; got {text!r}") from None


THRESHOLD_COLUMNS = ["i", "j", "r", "toy_lr", "sigma0_th", "gf_exact", "rel_error", "thm2_lower", "thm2_upper",
                     "thm2_upper_valid", "thm3_chain_lower", "thm3_stated_lower", "thm3_upper", "monotone",
                     "n_undecided", "status"]


def _thresholds(args) -> int:
    import pandas as pd

    from dlsweep import api

    table = api.thresholds(args.folder, s=args.s, f=args.f, pairs=args.pairs, method=args.method, rtol=args.rtol,
                           out=args.out)
    cells = table.attrs["cells"]
    shown = [c for c in THRESHOLD_COLUMNS[:3] + cells + THRESHOLD_COLUMNS[3:] if c in table]
    theorem3 = [c for c in shown if c.startswith("thm3")]
    if theorem3 and table[theorem3].isna().all().all():
        shown = [c for c in shown if c not in theorem3]
    with pd.option_context("display.width", 200, "display.max_columns", None, "display.max_rows", None):
        print(table[shown].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    notes = sorted({n for n in table.get("theory_note", pd.Series(dtype=str)) if n})
    for note in notes:
        print(f"note: {note}")
    if "thm2_printed_violated" in table and table.thm2_printed_violated.any():
        print(f"note: {int(table.thm2_printed_violated.sum())} row(s) where gf_exact exceeds Theorem 2's printed "
              "N >= 3 upper bound (thm2_printed_violated)")
    for line in _pair_summaries(table):
        print(line)
    partial = table.attrs["partial"]
    if partial:
        print(f"note: {partial}: these thresholds come from the finished chunks only; run the spec again to finish")
    print(f"(s, f) = ({args.s:g}, {args.f:g}), method {args.method}{f', {partial}' if partial else ''}; written to "
          f"{table.attrs['written_to']}")
    return 0


def _pair_summaries(table: pd.DataFrame) -> list[str]:
    """One line per pair: in how many cells it has a threshold, and by status why the others have
    none, or what could move a threshold (the table's `reason`)."""
    lines = []
    for (i, j), pair in table.groupby(["i", "j"], sort=True):
        explained = pair[pair.reason != ""].groupby(["status", "reason"], sort=False).size()
        mixed = ~pair.monotone.astype(bool)
        lines.append(f"pair {i}-{j}: a threshold in {int((pair.status == 'ok').sum())} of {len(pair)} cells"
                     + "".join(f"; {count} {status}: {reason}" for (status, reason), count in explained.items())
                     + (f"; {int(mixed.sum())} not monotone in sigma0 (incremental above non-incremental over at most "
                        f"{pair.interleaved_decades[mixed].max():.2g} decades: column interleaved_decades)"
                        if mixed.any() else ""))
    return lines


TABLE_SUFFIXES = (".csv", ".parquet")


def _pcs(args) -> int:
    import pandas as pd

    from dlsweep import api

    if args.out and not args.out.lower().endswith(TABLE_SUFFIXES):
        raise StoreError(f"-o {args.out}: expected a file ending in {' or '.join(TABLE_SUFFIXES)}")
    table = api.pc_rates(args.folder) if args.rates else api.pc_spread(args.folder)
    shown = table
    if not args.rates:       # per cell, the last step that every seed recorded
        cells = [c for c in table.columns if c not in ("step", "j", "mean", "std", "seeds")]
        whole = table[table.seeds == table.groupby(cells).seeds.transform("max")]
        shown = whole[whole.step == whole.groupby(cells).step.transform("max")]
    with pd.option_context("display.width", 200, "display.max_columns", None, "display.max_rows", None):
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.out:
        try:
            (table.to_csv(args.out, index=False) if args.out.lower().endswith(".csv") else table.to_parquet(args.out, index=False))
        except OSError as err:
            raise StoreError(f"-o {args.out}: cannot write the table ({os.strerror(err.errno) if err.errno else err})") from None
        print(f"written to {args.out} ({len(table)} rows)")
    return 0


def _submit(args) -> int:
    from dlsweep import api, submit

    done = submit.submit(args.spec, args.shards, executor=args.executor, out=args.out, overrides=args.overrides,
                         partition=args.partition, gpus_per_task=args.gpus_per_task, cpus_per_task=args.cpus_per_task,
                         time_min=args.time, mem_gb=args.mem_gb, chunk_size=args.chunk_size,
                         wait=True if args.wait else None)
    print(f"{done.folder}: submitted {len(done.job_ids)} shard job(s): {', '.join(done.job_ids)}")
    if done.results is not None:
        status = api.show(done.folder)
        print(f"{done.folder}: runs {status['runs']}, chunks {status['chunks']}")
    return 0


def _plot(args) -> int:
    from dlsweep import api

    pair = args.pair[0] if isinstance(args.pair, list) else None
    if args.pair is not None and (not isinstance(args.pair, list) or len(args.pair) != 1):
        raise PlotError(f"--pair: expected one pair like 0-1, got {args.pair!r}")
    for path in api.plot_run(args.folder, kind=args.kind, x=args.x, y=args.y, color=args.color, pair=pair,
                             s=args.s, f=args.f, out=args.out, title=args.title, at=args.at, formats=args.format,
                             facet=args.facet, time=args.time):
        print(path)
    return 0


def _reproduce(args) -> int:
    from dlsweep import reproduce

    if args.all:
        every = reproduce.run_all(args.quick, args.out_root, args.format, args.docs, args.skip)
        for done, seconds in every.done:
            _print_reproduced(done, seconds)
        if not args.quick:
            print(f"gallery: {Path(args.docs) / 'gallery.md'}")
        for name, error in every.failed.items():
            print(f"dlsweep: error: {name} failed ({error}); the others ran; run it alone to see it again "
                  f"(its finished chunks are kept)", file=sys.stderr)
        return 2 if every.failed else 0
    if args.list or not args.name:
        for repro in reproduce.REPRODUCTIONS.values():
            print(f"{repro.name:<26} {repro.paper}\n{'':<26} {repro.what}\n{'':<26} {repro.timing()}")
        print(f"\n{reproduce.TIMES}")
        return 0
    _print_reproduced(reproduce.run(args.name, quick=args.quick, out_root=args.out_root, formats=args.format))
    return 0


def _print_reproduced(done, seconds: float | None = None) -> None:
    print(f"{done.name}: run folder {done.folder}" + (f" ({seconds:.0f} s)" if seconds is not None else ""))
    for report in done.runs:
        print(_ended(report))
    if done.thresholds:
        print(f"thresholds: {done.thresholds}")
    for path in done.figures:
        print(f"figure: {path}")


def _show(args) -> int:
    from dlsweep import api

    summary = api.show(args.folder)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    width, flags = max(len(k) for k in summary), option_flags(_parser())
    for key, value in summary.items():
        if key in ("missing_chunks", "damaged_chunks"):
            value = "none" if not value else ", ".join(map(str, value[:20])) + (" ..." if len(value) > 20 else "")
        elif key == "columns":
            value = ", ".join(value)
        print(f"{key:<{width}}  {in_flags(str(value), flags)}")
    return 0


def _models(args) -> int:
    from dlsweep import api

    for row in api.list_models().itertuples():
        print(f"{row.model}\n  {row.summary}\n  axes: {row.axes}\n  task: {row.task}")
    return 0


# ----------------------------------------------------------------------------- messages in flags


def option_flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Every option of every verb by its Python parameter name (its dest: `chunk_size` for
    --chunk-size, `overrides` for --set): the table `in_flags` reads. One name is one flag in
    every verb that has it."""
    table = {}
    for action in parser._actions:                       # argparse keeps no public list of them
        if action.option_strings and action.dest != "help":
            table[action.dest] = action
        for verb in (action.choices or {}).values() if isinstance(action.choices, dict) else ():
            table |= option_flags(verb)
    return table


QUOTED = r"'[^']*'|\"[^\"]*\""
PYTHON_VALUE = (rf"{QUOTED}|\[(?:{QUOTED}|[^\[\]'\"])*\]|\((?:{QUOTED}|[^()'\"])*\)|\{{(?:{QUOTED}|[^{{}}'\"])*\}}"
                r"|[^\s,;:)\]}]+")     # a quoted string, a list, tuple or dict (strings may hold brackets), or a word
OPTION_IN_MESSAGE = re.compile(rf"(?<![\w.'\"-])(?P<name>[a-z][a-z_]*)=(?P<value>{PYTHON_VALUE})")
FLAG_VALUES = {             # options whose flag takes another syntax than the Python value (see _shard, _at, _pairs)
    "shard": lambda value: f"{value[0]}/{value[1]}",
    "at": lambda value: ",".join(f"{axis}={number:g}" for axis, number in value.items()),
    "pair": lambda value: f"{value[0]}-{value[1]}",
    "pairs": lambda value: value if isinstance(value, str) else ",".join(f"{i}-{j}" for i, j in value),
}


def in_flags(message: str, flags: dict[str, argparse.Action]) -> str:
    """A library message with each `name=value` of an option in `flags` as the command line
    writes it: `overwrite=True` -> `--overwrite`, `chunk_size=0` -> `--chunk-size 0`,
    `overrides=['steps=1']` -> `--set steps=1`, `out='a b.png'` -> `--out 'a b.png'`."""

    def flag(match: re.Match) -> str:
        action = flags.get(match["name"])
        if action is None:
            return match[0]
        name = max(action.option_strings, key=len)
        try:
            value = ast.literal_eval(match["value"])
        except (ValueError, SyntaxError):
            value = Ellipsis
        if value is Ellipsis:                      # a placeholder such as out=...
            return f"{name} {match['value']}"
        if action.nargs == 0:                      # a switch (--overwrite)
            return name
        if match["name"] in FLAG_VALUES:
            try:
                value = FLAG_VALUES[match["name"]](value)
            except (TypeError, ValueError, IndexError, AttributeError):      # not a value the flag takes
                return f"{name} {match['value']}"
        items = value if isinstance(action, argparse._AppendAction) and isinstance(value, list) else [value]
        return " ".join(f"{name} {shlex.quote(item) if isinstance(item, str) else item}" for item in items)

    return OPTION_IN_MESSAGE.sub(flag, message)


def main(argv: list[str] | None = None) -> int:
    """The command line; errors and DlsweepWarnings are one line each on stderr, in flags."""
    parser = _parser()
    args = parser.parse_args(argv)
    flags = option_flags(parser)
    python_warning = warnings.showwarning

    def show_warning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DlsweepWarning):
            print(f"dlsweep: warning: {in_flags(str(message), flags)}", file=sys.stderr)
        else:
            python_warning(message, category, filename, lineno, file, line)

    with interrupt.exits_at_once(INTERRUPTED):     # the library (JAX takes seconds): Ctrl-C exits cleanly here too
        import dlsweep.api  # noqa: F401
    resume = "; finished chunks are kept, run again to resume" if args.verb in RESUMABLE else ""
    with warnings.catch_warnings(), interrupt.exits_at_once(INTERRUPTED + resume):
        warnings.showwarning = show_warning
        try:
            verbs = {"run": _run, "submit": _submit, "thresholds": _thresholds, "pcs": _pcs, "plot": _plot,
                     "reproduce": _reproduce, "show": _show, "models": _models}
            return verbs[args.verb](args)
        except (SpecError, StoreError, ThresholdError, PlotError) as err:
            print(f"dlsweep: error: {in_flags(str(err), flags)}", file=sys.stderr)
            return 2
        except BrokenPipeError:         # stdout closed early (`dlsweep reproduce --list | head`): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141


def command(argv: list[str] | None = None) -> int:
    """The `dlsweep` command: `main` in a process that asks JAX for one CPU device per usable core
    first (`engine.use_cpu_cores`), so one-by-one sweeps run on every core; in-process callers of
    `main` keep their JAX as it is."""
    with interrupt.exits_at_once(INTERRUPTED):
        from dlsweep import engine
    try:
        engine.use_cpu_cores()
    except ValueError as err:
        print(f"dlsweep: error: {err}", file=sys.stderr)
        return 2
    return main(argv)


if __name__ == "__main__":
    sys.exit(command())
