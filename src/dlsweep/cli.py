"""Command line: `dlsweep run | submit | thresholds | pcs | plot | reproduce | show | models`. A
thin shell over `dlsweep.api`."""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from dlsweep import api
from dlsweep.analysis.incremental import ThresholdError
from dlsweep.plot import PlotError
from dlsweep.spec import SpecError
from dlsweep.store import StoreError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlsweep", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    run = verbs.add_parser("run", help="run a sweep spec into a Parquet dataset folder")
    run.add_argument("spec", help="sweep TOML file, e.g. sweeps/toy-threshold.toml")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a spec key (TOML value), e.g. --set steps=20000 --set axes.lr=[1e-3]")
    run.add_argument("--out", help="dataset folder (default runs/<name>)")
    run.add_argument("--chunk-size", type=int, help="trajectories per compiled call (default: from a memory estimate)")
    run.add_argument("--max-chunks", type=int, help="stop after this many chunks; run again to fill the rest")
    run.add_argument("--overwrite", action="store_true", help="empty the folder and start over")
    run.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    run.add_argument("--shard", type=_shard, metavar="K/N",
                     help="run only shard K of N (chunks K-1, K-1+N, ...); the N shards share the folder")

    sub = verbs.add_parser("submit", help="run a sweep as N shards through submitit (Slurm job array or local)")
    sub.add_argument("spec", help="sweep TOML file")
    sub.add_argument("--shards", type=int, required=True, help="number of shards (jobs)")
    sub.add_argument("--executor", choices=("local", "slurm"), default="local")
    sub.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    sub.add_argument("--out", help="dataset folder (default runs/<name>)")
    sub.add_argument("--chunk-size", type=int, help="trajectories per chunk (default: from a memory estimate)")
    sub.add_argument("--partition", help="Slurm partition")
    sub.add_argument("--gpus-per-task", type=int, help="GPUs per job")
    sub.add_argument("--cpus-per-task", type=int, help="CPUs per job")
    sub.add_argument("--mem-gb", type=float, help="memory per job, GB")
    sub.add_argument("--time", type=int, default=60, help="time limit per job, minutes (default 60)")
    sub.add_argument("--wait", action="store_true", help="wait for Slurm jobs too (local jobs are always waited for)")

    th = verbs.add_parser("thresholds", help="sigma0 thresholds of (s, f)-incremental learning, with theory")
    th.add_argument("folder", help="a run folder, e.g. runs/toy-threshold")
    th.add_argument("--s", type=float, default=0.05, help="level s of Definition 1, in (0, 0.25) (default 0.05)")
    th.add_argument("--f", type=float, default=0.95, help="level f of Definition 1, in (0.75, 1) (default 0.95)")
    th.add_argument("--pairs", default="adjacent", type=_pairs,
                    help="adjacent (default), all, or explicit pairs i-j like 0-1,0-3")
    th.add_argument("--method", choices=("grid", "bisect"), default="grid",
                    help="grid: read off the sigma0 axis; bisect: refine by batched bisection in ln sigma0")
    th.add_argument("--rtol", type=float, default=1e-4, help="bisection: relative width of the final bracket")

    pc = verbs.add_parser("pcs", help="per principal direction (linear_net): the spread over seeds, or convergence rates")
    pc.add_argument("folder", help="a run folder of linear_net, e.g. runs/hacohen-fig4/natural")
    pc.add_argument("--rates", action="store_true",
                    help="measured convergence rates beside eq. 10's prediction (default: mean and std over seeds)")
    pc.add_argument("-o", "--out", help="write the whole table here (.csv or .parquet)")

    pl = verbs.add_parser("plot", help="draw a figure of a run (also saved under DIR/figures/)")
    pl.add_argument("folder", help="a run folder")
    pl.add_argument("--kind", choices=api.PLOT_KINDS, default="heatmap")
    pl.add_argument("--x", help="heatmap x axis (default sigma0; --x r --y depth maps the thresholds); "
                                "trajectories: the axis across panel columns (default depth)")
    pl.add_argument("--y", help="heatmap y axis (default depth); trajectories: the axis down panel rows (default sigma0)")
    pl.add_argument("--color", help="heatmap colour: status (default), log_hit_ratio, or a runs column (population_error, "
                                    "l1_l2_position, ...); summary: the axis of one line each (default shape)")
    pl.add_argument("--pair", type=_pairs, help="the pair i-j for heatmaps and guides (default: the two largest targets)")
    pl.add_argument("--s", type=float, default=0.05, help="level s of Definition 1 (default 0.05)")
    pl.add_argument("--f", type=float, default=0.95, help="level f of Definition 1 (default 0.95)")
    pl.add_argument("-o", "--out", help="also write the figure here (.png, .pdf or .svg)")
    pl.add_argument("--title", help="trajectories: a title over the panels")
    pl.add_argument("--at", type=_at, help="draw at these values of other axes, e.g. depth=3 or depth=3,lr=0.01")

    rp = verbs.add_parser("reproduce", help="run a bundled reproduction of a paper figure")
    rp.add_argument("name", nargs="?", help="e.g. gissin-depth-separation (see --list)")
    rp.add_argument("--list", action="store_true", help="list the reproductions and their paper figures")
    rp.add_argument("--quick", action="store_true", help="a small version (under a minute on a laptop CPU)")
    rp.add_argument("--out-root", default="runs", help="where run folders go (default runs/)")

    show = verbs.add_parser("show", help="summary of a finished or partial run folder")
    show.add_argument("folder")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")

    verbs.add_parser("models", help="list the model families")
    return parser


def _run(args) -> int:
    report = api.run(args.spec, out=args.out, overrides=args.overrides, chunk_size=args.chunk_size,
                     overwrite=args.overwrite, progress_bar=False if args.no_progress else None,
                     max_chunks=args.max_chunks, shard=args.shard)
    if report.chunks_run:
        print(f"{report.folder}: ran {report.chunks_run} chunk(s) "
              f"({report.traj_steps:.3g} trajectory-steps) in {report.run_seconds:.2f} s "
              f"= {report.traj_steps_per_second:.3g} traj-steps/s; compile {report.compile_seconds:.2f} s")
    if report.chunks_skipped:
        print(f"{report.folder}: {report.chunks_skipped} chunk(s) were already finished (resumed)")
    status = "complete" if report.chunks_missing == 0 else f"{report.chunks_missing} chunk(s) still missing"
    print(f"{report.folder}: {report.n_runs} trajectories, {status}")
    return 0


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


def _pairs(text: str):
    if text in ("adjacent", "all"):
        return text
    try:
        return [tuple(int(v) for v in item.split("-", 1)) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected adjacent, all, or pairs like 0-1,1-2; got {text!r}") from None


THRESHOLD_COLUMNS = ["i", "j", "r", "toy_lr", "sigma0_th", "gf_exact", "rel_error", "thm2_lower", "thm2_upper",
                     "thm2_upper_valid", "thm3_lower", "thm3_upper", "monotone", "n_undecided", "status"]


def _thresholds(args) -> int:
    table = api.thresholds(args.folder, s=args.s, f=args.f, pairs=args.pairs, method=args.method, rtol=args.rtol)
    cells = [c for c in ("depth", "lr", "seed") if c in table]
    shown = [c for c in THRESHOLD_COLUMNS[:3] + cells + THRESHOLD_COLUMNS[3:] if c in table]
    if "thm3_lower" in table and table.thm3_lower.isna().all() and table.thm3_upper.isna().all():
        shown = [c for c in shown if not c.startswith("thm3")]
    with pd.option_context("display.width", 200, "display.max_columns", None, "display.max_rows", None):
        print(table[shown].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    notes = sorted({n for n in table.get("theory_note", pd.Series(dtype=str)) if n})
    for note in notes:
        print(f"note: {note}")
    if "thm2_printed_violated" in table and table.thm2_printed_violated.any():
        print(f"note: {int(table.thm2_printed_violated.sum())} row(s) where gf_exact exceeds Theorem 2's printed "
              "N >= 3 upper bound (thm2_printed_violated)")
    print(f"(s, f) = ({args.s:g}, {args.f:g}), method {args.method}; written to "
          f"{args.folder.rstrip('/')}/{api.THRESHOLDS_FILE}")
    return 0


TABLE_SUFFIXES = (".csv", ".parquet")


def _pcs(args) -> int:
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
        (table.to_csv(args.out, index=False) if args.out.lower().endswith(".csv") else table.to_parquet(args.out, index=False))
        print(f"written to {args.out} ({len(table)} rows)")
    return 0


def _submit(args) -> int:
    from dlsweep import submit

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
    pair = args.pair[0] if isinstance(args.pair, list) else None
    if args.pair is not None and (not isinstance(args.pair, list) or len(args.pair) != 1):
        raise PlotError(f"--pair: expected one pair like 0-1, got {args.pair!r}")
    for path in api.plot_run(args.folder, kind=args.kind, x=args.x, y=args.y, color=args.color, pair=pair,
                             s=args.s, f=args.f, out=args.out, title=args.title, at=args.at):
        print(path)
    return 0


def _reproduce(args) -> int:
    from dlsweep import reproduce

    if args.list or not args.name:
        for repro in reproduce.REPRODUCTIONS.values():
            print(f"{repro.name:<26} {repro.paper}\n{'':<26} {repro.what}")
        return 0
    done = reproduce.run(args.name, quick=args.quick, out_root=args.out_root)
    print(f"{done.name}: run folder {done.folder}")
    if done.thresholds:
        print(f"thresholds: {done.thresholds}")
    for path in done.figures:
        print(f"figure: {path}")
    return 0


def _show(args) -> int:
    summary = api.show(args.folder)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        if key == "missing_chunks":
            value = "none" if not value else ", ".join(map(str, value[:20])) + (" ..." if len(value) > 20 else "")
        elif key == "columns":
            value = ", ".join(value)
        print(f"{key:<{width}}  {value}")
    return 0


def _models(args) -> int:
    for row in api.list_models().itertuples():
        print(f"{row.model}\n  {row.summary}\n  axes: {row.axes}\n  task: {row.task}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        verbs = {"run": _run, "submit": _submit, "thresholds": _thresholds, "pcs": _pcs, "plot": _plot,
                 "reproduce": _reproduce, "show": _show, "models": _models}
        return verbs[args.verb](args)
    except (SpecError, StoreError, ThresholdError, PlotError) as err:
        print(f"dlsweep: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dlsweep: interrupted; finished chunks are kept, run again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
