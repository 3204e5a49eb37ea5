"""Incremental learning from first-hitting steps, and the sigma0 thresholds where it stops.

Definition 1 of Gissin et al. 2020: values with targets s*_i > s*_j are learned (s, f)-incrementally
when some step has sigma_j <= s s*_j while sigma_i >= f s*_i. With the dataset's first-hitting
steps hf = hit_<i>_<100 f> and hs = hit_<j>_<100 s> (-1: not within the run):

    incremental       hf >= 0 and (hs < 0 or hf < hs)   (strict: the same step is not incremental)
    not incremental   hs >= 0 and (hf < 0 or hf >= hs)
    undecided         hf < 0 and hs < 0 (too few steps), or the trajectory diverged

Undecided trajectories never move a threshold. The threshold of a cell (a value of every axis but
sigma0) is the largest incremental sigma0 (THEORY.md 2.2: under GD the incremental set can be
non-monotone near it, with incremental islands above a non-incremental stretch, which the
`monotone` column reports). A cell without a threshold, or whose threshold undecided trajectories
could move, says why in `reason`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dlsweep.analysis import theory
from dlsweep.errors import ThresholdError
from dlsweep.store import level_name

INCREMENTAL, NOT_INCREMENTAL, UNDECIDED, DIVERGED = "incremental", "not incremental", "undecided", "diverged"
S_RANGE, F_RANGE = (0.0, 0.25), (0.75, 1.0)          # Definition 1 (and Theorem 3)
LOG_FLOAT64_TINY = math.log(np.finfo(np.float64).tiny)
THEORY_COLUMNS = ("gf_exact", "gf_exact_log10", "rel_error", "thm2_lower", "thm2_upper", "thm2_upper_valid",
                  "thm2_printed_violated", "thm3_chain_lower", "thm3_stated_lower", "thm3_upper", "thm3_reason",
                  "theory_note")
NOT_TOY = "these runs do not follow the toy model's dynamics (no theory)"


def check_levels(s: float, f: float, levels) -> None:
    """s in (0, 1/4) and f in (3/4, 1) (Definition 1), both among the run's recorded levels."""
    if not S_RANGE[0] < s < S_RANGE[1]:
        raise ThresholdError(f"s={s:g}: Definition 1 needs s in (0, 0.25)")
    if not F_RANGE[0] < f < F_RANGE[1]:
        raise ThresholdError(f"f={f:g}: Definition 1 needs f in (0.75, 1)")
    names = {level_name(level) for level in levels}
    for name, value in (("s", s), ("f", f)):
        if level_name(value) not in names:
            raise ThresholdError(f"{name}={value:g}: the run did not record this level; its levels are "
                                 f"{', '.join(f'{v:g}' for v in levels) or 'none'} (set [record] levels in the spec)")


def pairs_for(sigma_star, which: str | list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Pairs (i, j) with s*_i > s*_j: `adjacent` (neighbours in decreasing order of target),
    `all`, or an explicit list, each checked."""
    values = list(sigma_star)
    if isinstance(which, str):
        order = sorted(range(len(values)), key=lambda k: -values[k])
        if which == "adjacent":
            return [(a, b) for a, b in zip(order, order[1:]) if values[a] > values[b]]
        if which == "all":
            return [(a, b) for n, a in enumerate(order) for b in order[n + 1:] if values[a] > values[b]]
        raise ThresholdError(f"pairs={which!r}: expected 'adjacent', 'all', or a list of pairs like [(0, 1), (1, 2)]")
    for i, j in which:
        if not (0 <= i < len(values) and 0 <= j < len(values)):
            raise ThresholdError(f"pair {i}-{j}: the task has values 0..{len(values) - 1}")
        if not values[i] > values[j]:
            raise ThresholdError(f"pair {i}-{j}: needs sigma*_{i} > sigma*_{j}, got {values[i]:g} <= {values[j]:g}")
    return list(which)


def decide(hit_f_i: np.ndarray, hit_s_j: np.ndarray, diverged: np.ndarray) -> np.ndarray:
    """Definition 1 from first-hitting steps, per trajectory (see the module docstring)."""
    hit_f_i, hit_s_j = np.asarray(hit_f_i), np.asarray(hit_s_j)
    status = np.where(hit_f_i >= 0,
                      np.where((hit_s_j < 0) | (hit_f_i < hit_s_j), INCREMENTAL, NOT_INCREMENTAL),
                      np.where(hit_s_j >= 0, NOT_INCREMENTAL, UNDECIDED))
    return np.where(np.asarray(diverged, bool), DIVERGED, status).astype(object)


def decisions(runs: pd.DataFrame, pairs, s: float, f: float) -> pd.DataFrame:
    """One row per (trajectory, pair): the run's axis values, `i`, `j`, `status` and `margin`
    = hs - hf in steps (> 0 incremental; NaN where a level was not reached)."""
    frames = []
    for i, j in pairs:
        hf = runs[f"hit_{i}_{level_name(f)}"].to_numpy()
        hs = runs[f"hit_{j}_{level_name(s)}"].to_numpy()
        margin = np.where((hf >= 0) & (hs >= 0), hs - hf, np.nan)
        frames.append(runs.assign(i=i, j=j, status=decide(hf, hs, runs["diverged"].to_numpy()), margin=margin))
    return pd.concat(frames, ignore_index=True)


def _interpolate(lo: float, hi: float, margin_lo: float, margin_hi: float) -> float:
    """Where the integer hitting-step margin hs - hf crosses from >= 1 (incremental, at `lo`) to
    <= 0 (not, at `hi`): its value 1/2, linear in ln sigma0, so the result lies strictly inside
    the bracket; the geometric midpoint where a margin is unknown."""
    if np.isfinite(margin_lo) and np.isfinite(margin_hi) and margin_lo > margin_hi:
        weight = (margin_lo - 0.5) / (margin_lo - margin_hi)
    else:
        weight = 0.5
    value = math.exp(math.log(lo) + weight * (math.log(hi) - math.log(lo)))
    return min(max(value, lo), math.nextafter(hi, 0.0))


def _groups(table: pd.DataFrame, keys: list[str], sort: bool):
    """(key, sigma0, status, margin) of each group of `table` by `keys` (in groupby's order), its
    rows ordered by sigma0 (stable) as NumPy arrays: the per-group work of `grid_thresholds` and
    `judge` on arrays rather than DataFrame filters."""
    sigma0 = table["sigma0"].to_numpy(float)
    status = table["status"].to_numpy(object)
    margin = table["margin"].to_numpy(float) if "margin" in table else np.full(len(table), math.nan)
    for key, rows in table.groupby(keys, sort=sort, dropna=False).indices.items():
        rows = rows[np.argsort(sigma0[rows], kind="stable")]
        yield key if isinstance(key, tuple) else (key,), sigma0[rows], status[rows], margin[rows]


def _decided(status: np.ndarray) -> np.ndarray:
    return (status == INCREMENTAL) | (status == NOT_INCREMENTAL)


def grid_thresholds(table: pd.DataFrame, cell_columns: list[str]) -> pd.DataFrame:
    """Per cell and pair, from the sigma0 axis: the largest incremental sigma0 `bracket_lo`, the
    next decided (non-incremental) sigma0 `bracket_hi`, `sigma0_th` interpolated between them,
    the counts of each status, `status` (ok | below grid | above grid | undecided), and `monotone`
    and `reason` (`judge`)."""
    keys = [*cell_columns, "i", "j"]
    rows = []
    for key, sigma0, status, margin in _groups(table, keys, sort=True):
        decided = _decided(status)
        flags = status[decided] == INCREMENTAL
        decided_sigma0, decided_margin = sigma0[decided], margin[decided]
        row = dict(zip(keys, key))
        row.update(
            n_incremental=int(flags.sum()), n_not_incremental=int((~flags).sum()),
            n_undecided=int((status == UNDECIDED).sum()), n_diverged=int((status == DIVERGED).sum()),
            sigma0_th=math.nan, bracket_lo=math.nan, bracket_hi=math.nan)
        if not len(flags):
            row["status"] = "undecided"
        elif not flags.any():
            row.update(status="below grid", bracket_lo=0.0, bracket_hi=float(decided_sigma0[0]))
        else:
            last = int(np.nonzero(flags)[0][-1])
            if last == len(flags) - 1:
                row.update(status="above grid", bracket_lo=float(decided_sigma0[last]), bracket_hi=math.inf)
            else:
                lo, hi = decided_sigma0[last], decided_sigma0[last + 1]
                row.update(status="ok", bracket_lo=float(lo), bracket_hi=float(hi),
                           sigma0_th=_interpolate(lo, hi, decided_margin[last], decided_margin[last + 1]))
        rows.append(row)
    return judge(pd.DataFrame(rows), table, cell_columns)


# Why a cell has no threshold, or what could move its threshold (the `reason` column; "" for neither)
ALL_DIVERGED = "every trajectory diverged (try a smaller lr)"
NEVER_REACHED = "no trajectory reached either level within the run's steps (try more steps)"
DIVERGED_OR_NEVER_REACHED = "every trajectory diverged or reached neither level within the run's steps"
NONE_INCREMENTAL = "no incremental sigma0 on the grid (the threshold lies below it)"
NONE_INCREMENTAL_UNDECIDED_BELOW = ("no decided sigma0 is incremental, and smaller ones are undecided or diverged "
                                    "(the threshold may lie among them)")
ALL_INCREMENTAL = "every decided sigma0 on the grid is incremental (the threshold lies above it)"
STALLED = "undecided inside the bracket"          # a `status`: refinement found nothing decided there
STALLED_REASON = "the refinement found only undecided or diverged sigma0 inside the bracket"
MAY_BE_HIGHER = "undecided or diverged sigma0 above bracket_lo, so the threshold may lie higher"


def judge(thresholds: pd.DataFrame, points: pd.DataFrame, cell_columns: list[str]) -> pd.DataFrame:
    """`monotone` and `reason` of each row of a thresholds table, from every sigma0 evaluated on its
    cell and pair: `points` has the columns of `decisions` (the run's trajectories, and any
    refinement points after them). monotone: no incremental sigma0 lies above a non-incremental
    one; interleaved_decades: where one does, log10 of the largest incremental sigma0 over the
    smallest non-incremental one (a tie of first-hitting steps at the threshold spans a sliver of
    a decade, an island far above it decades), else 0. reason: why a row without a threshold has
    none (the module's constants; below the grid, whether undecided or diverged sigma0 lie below
    its smallest decided one, where the threshold is), or, for a row with one, that an undecided
    or diverged sigma0 above bracket_lo could hide a larger incremental one."""
    keys = [*cell_columns, "i", "j"]
    cells = {key: group for key, *group in _groups(points, keys, sort=False)}
    monotone, interleaved, reasons = [], [], []
    for row in thresholds.itertuples(index=False):
        sigma0, status, _ = cells[tuple(getattr(row, k) for k in keys)]
        decided = _decided(status)
        flags = status[decided] == INCREMENTAL
        monotone.append(bool(np.all(flags[:-1] >= flags[1:])))
        decided_sigma0 = sigma0[decided]
        interleaved.append(0.0 if monotone[-1] else float(np.log10(decided_sigma0[flags].max()
                                                                     / decided_sigma0[~flags].min())))
        unknown = sigma0[(status == UNDECIDED) | (status == DIVERGED)]
        if row.status == "undecided":
            reasons.append(ALL_DIVERGED if row.n_undecided == 0 else
                           NEVER_REACHED if row.n_diverged == 0 else DIVERGED_OR_NEVER_REACHED)
        elif row.status == "below grid":
            reasons.append(NONE_INCREMENTAL_UNDECIDED_BELOW if (unknown < row.bracket_hi).any()
                           else NONE_INCREMENTAL)
        elif row.status in ("above grid", STALLED):
            reasons.append(ALL_INCREMENTAL if row.status == "above grid" else STALLED_REASON)
        else:
            reasons.append(MAY_BE_HIGHER if (unknown > row.bracket_lo).any() else "")
    return thresholds.assign(monotone=monotone, interleaved_decades=interleaved, reason=reasons)


def over_seeds(decided: pd.DataFrame, cells: list[str]) -> pd.DataFrame:
    """Per cell (the values of `cells`) of a `decisions` table, over the seed axis:
    `incremental_fraction`, the share of the decided seeds that learn incrementally (NaN where none
    is decided), and `seeds`, how many are decided."""
    known = decided.status.isin([INCREMENTAL, NOT_INCREMENTAL])
    flags = (decided.status == INCREMENTAL).astype(float).where(known)
    return (decided.assign(incremental_fraction=flags, seeds=known)
            .groupby(cells, as_index=False).agg(incremental_fraction=("incremental_fraction", "mean"),
                                                 seeds=("seeds", "sum")))


def thresholds_over_seeds(table: pd.DataFrame, cells: list[str]) -> pd.DataFrame:
    """Per cell and pair of a thresholds table, over the seed axis: the median `sigma0_th` of the
    seeds that have one, its range `sigma0_th_min`, `sigma0_th_max`, their count `seeds`, and the
    theory columns (the same for every seed)."""
    keys = [*cells, "i", "j"]
    found = table[table.status == "ok"]
    summary = found.groupby(keys, as_index=False).agg(
        sigma0_th=("sigma0_th", "median"), sigma0_th_min=("sigma0_th", "min"),
        sigma0_th_max=("sigma0_th", "max"), seeds=("sigma0_th", "size"))
    theory_part = [c for c in THEORY_COLUMNS if c in table and c != "rel_error"]
    return summary.merge(table.groupby(keys, as_index=False)[theory_part].first(), on=keys) if theory_part else summary


SUBGRID_POINTS = 15      # sigma0 values per row and round of the refinement (`thresholds --method bisect`)


def subgrid(lo, hi, points: int = SUBGRID_POINTS) -> np.ndarray:
    """`points` sigma0 values per row strictly inside (lo, hi), evenly spaced in ln sigma0:
    lo (hi/lo)^(k/(points + 1)), k = 1..points. Returns (rows, points)."""
    lo, hi = np.asarray(lo, float)[:, None], np.asarray(hi, float)[:, None]
    return lo * (hi / lo) ** (np.arange(1, points + 1) / (points + 1))


def refine_update(lo: np.ndarray, points: np.ndarray, status: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One vectorized refinement round, per row: the largest incremental sigma0 among `lo` (known
    incremental) and the row's `points` (rows, P) becomes the new lo, and the smallest
    non-incremental point above it the new hi; undecided and diverged points move nothing. The
    caller includes a known non-incremental upper end among the points (else the new hi is inf)."""
    order = np.argsort(points, axis=1, kind="stable")
    points, status = np.take_along_axis(points, order, 1), np.take_along_axis(status, order, 1)
    columns = np.arange(points.shape[1])
    last = np.where(status == INCREMENTAL, columns, -1).max(axis=1)
    rows = np.arange(len(points))
    new_lo = np.where(last >= 0, points[rows, np.maximum(last, 0)], lo)
    above = (status == NOT_INCREMENTAL) & (columns > last[:, None])
    new_hi = np.where(above.any(axis=1), points[rows, above.argmax(axis=1)], math.inf)
    return new_lo, new_hi


def theory_columns(table: pd.DataFrame, sigma_star, s: float, f: float, sigma_star_max: float) -> pd.DataFrame:
    """The theory of Gissin et al. beside each threshold row (needs `depth`; the toy's step `toy_lr`,
    or else `lr`, for Theorem 3): gf_exact (and its log10, exact also below the float range),
    Theorem 2 as printed and the valid N >= 3 upper bound, whether gf_exact breaks the printed bound,
    Theorem 3 for GD at N = 2 (the lower bound of its proof's chain and the one it states,
    `theory.thm3_bounds`). A value below the float64 range is NaN with a `theory_note`, never 0;
    a row whose `toy_lr` is NaN (a model that does not follow the toy's dynamics there) gets only
    the note."""
    gf_cache: dict = {}
    out = []
    for row in table.itertuples(index=False):
        lr = float(getattr(row, "toy_lr", getattr(row, "lr", math.nan)))
        if hasattr(row, "toy_lr") and math.isnan(lr):
            out.append({"theory_note": NOT_TOY})
            continue
        si, sj, depth = sigma_star[row.i], sigma_star[row.j], float(row.depth)
        r = si / sj
        notes = []
        key = (si, sj, depth)
        if key not in gf_cache:
            try:
                gf_cache[key] = (theory.log_gf_threshold(si, sj, s, f, depth), "")
            except ArithmeticError as err:
                gf_cache[key] = (math.nan, f"no gf_exact: {err}")
        log_th, error = gf_cache[key]
        notes += [error] if error else []
        if log_th == -math.inf:
            notes.append(f"N = {depth:g}: gradient flow is never ({s:g}, {f:g})-incremental (no gf_exact)")
        log_bounds = theory.log_thm2_bounds(r, s, f, depth, sj)
        gf, lower, upper, valid = (_from_log(v, name, notes) for v, name in
                                   zip((log_th, *log_bounds), ("gf_exact", "thm2_lower", "thm2_upper", "thm2_upper_valid")))
        if depth == 2 and not math.isnan(lr):
            t3 = theory.thm3_bounds(si, sj, sigma_star_max, lr, s, f)
        else:
            t3 = theory.Theorem3Bounds(math.nan, math.nan, math.nan, "Theorem 3 is for gradient descent at N = 2")
        out.append({
            "gf_exact": gf,
            "gf_exact_log10": log_th / math.log(10) if log_th > -math.inf else -math.inf,
            "rel_error": row.sigma0_th / gf - 1 if gf > 0 else math.nan,
            "thm2_lower": lower, "thm2_upper": upper, "thm2_upper_valid": valid,
            "thm2_printed_violated": bool(depth >= 3 and log_th > log_bounds[1]),
            "thm3_chain_lower": t3.chain_lower, "thm3_stated_lower": t3.stated_lower, "thm3_upper": t3.upper,
            "thm3_reason": t3.reason,
            "theory_note": "; ".join(notes),
        })
    return pd.concat([table.reset_index(drop=True), pd.DataFrame(out, columns=list(THEORY_COLUMNS))], axis=1)


def _from_log(log_value: float, name: str, notes: list[str]) -> float:
    """exp of a log value, or NaN with a note when it lies below the float64 range."""
    if math.isnan(log_value) or log_value == -math.inf:
        return math.nan
    if log_value < LOG_FLOAT64_TINY:
        notes.append(f"{name} = 10^{log_value / math.log(10):.6g} is below the float64 range")
        return math.nan
    return math.exp(log_value)
