"""The engine: one gradient-descent trajectory as pure functions, batched with `jax.vmap` over a
chunk of the grid and compiled once per static configuration.

A trajectory's life, all inside one compiled program:

    init_state                     params from the model, the optimizer's state, hits at step 0
    _steps_with_peak               GD steps of a block, keeping per group of steps its start and
                                   the running maximum of sigma
    _steps_with_hits               the same steps with the first-hitting steps updated after each
    settle                         the check at a block's end: diverged -> restored to the block's
                                   start and frozen; converged -> frozen
    record                         (loss, everything the model observes) at a recorded step
    chunk_task                     the shared task plus the data the model draws per `seed` value
                                   (once, unbatched, when the chunk has one seed; once per seed when
                                   the chunk is whole cycles of the seed axis; else per trajectory)

The chunk program scans over record segments; inside a segment a `while_loop` advances the whole
chunk in blocks of `check_every` steps (`_advance_chunk`: every trajectory with the peak, then
only the groups of steps whose peak may hold a first hit again, with exact hits) and ends early once every
trajectory is frozen. Frozen trajectories are computed and discarded (SIMD has no per-lane skip),
so a trajectory's result never depends on which others share its chunk; and every compiled batch
is whole vector blocks laid out by the sweep alone (`LANES`, `seed_slots`, `COMPILER_OPTIONS`), or
a sweep smaller than one block at its own size, each run at a fixed position
(`small_sweep_batch`), so it never depends on the chunk size, the device count or the shard
either, bit for bit.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from dlsweep import optimizers
from dlsweep.model import INTEGER_HPS, PAIR_HPS, hook

STEP_DTYPE = jnp.int32
EXECUTED_DTYPE = jnp.float32   # trajectory-steps computed by a chunk (a count past int32; a sum of exact block sizes)
CACHE_ENV = "DLSWEEP_CACHE_DIR"        # where compiled programs persist; "off" disables


def use_compilation_cache() -> Path | None:
    """JAX's persistent compilation cache, on by default in the user's cache folder
    ($DLSWEEP_CACHE_DIR, else $XDG_CACHE_HOME/dlsweep/jax, else ~/.cache/dlsweep/jax), so a second
    run of the same static configuration loads its program instead of compiling it. Every
    program is cached, however quick its compile."""
    setting = os.environ.get(CACHE_ENV, "")
    if setting.lower() == "off":
        return None
    folder = Path(setting) if setting else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dlsweep" / "jax"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None                    # a read-only home: run without the cache
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


CPU_DEVICES_ENV = "DLSWEEP_CPU_DEVICES"     # JAX CPU devices of the `dlsweep` command; default: usable cores


def use_cpu_cores() -> int | None:
    """One JAX CPU device per core this process may use (its affinity), or $DLSWEEP_CPU_DEVICES,
    so that the chunks of a program that runs its trajectories one by one are dealt over the cores
    (`DealtExecutable`). Set before JAX starts its backends (the `dlsweep` command calls it
    first); left as it is where XLA_FLAGS already asks for a count or JAX has started. Returns the
    count set, or None."""
    setting = os.environ.get(CPU_DEVICES_ENV, "").strip()
    if setting and not (setting.isdigit() and int(setting) >= 1):
        raise ValueError(f"{CPU_DEVICES_ENV}={setting!r}: expected a whole number of CPU devices >= 1 (1 runs on one core)")
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return None
    count = int(setting) if setting else len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:            # JAX's backends already started (a caller's own JAX work)
        return None
    return count


def _schedule(schedule: str, points: int, steps: int) -> np.ndarray:
    """`points` steps from 0 to `steps`, log- or linearly spaced (log: geometric from step 1, so
    early dynamics are resolved; duplicates after rounding dropped)."""
    if schedule == "linear" or points == 2:
        grid = np.linspace(0, steps, points)
    else:
        grid = np.concatenate([[0.0], np.geomspace(1, steps, points - 1)])
    return np.unique(np.rint(grid).astype(np.int64))


def record_plan(schedule: str, points: int, steps: int, check_every: int = 64) -> tuple[np.ndarray, int]:
    """The recorded steps and the step P from which trajectories run in refilled slots.

    Every trajectory runs in lockstep with the others of its chunk up to step P, where the
    schedule is dense (its gaps shorter than `check_every` = K), and is recorded there exactly at
    the scheduled steps. From P to `steps` each trajectory runs in a slot of its own, K steps at a
    time, and a stopped one's slot is refilled with the next pending trajectory
    (`_refill_phase`): the scheduled steps there are rounded to the grid steps - j K (P is the
    first of them), where every slot checks and records. A schedule whose gaps never reach K (or
    a sweep of fewer than 2K steps) is all lockstep: P = steps. Never more than `points` steps,
    0 and `steps` always."""
    raw = _schedule(schedule, points, steps)
    k = check_every
    wide = np.nonzero(np.diff(raw) >= k)[0]
    if steps < 2 * k or len(wide) == 0:
        return raw, steps
    dense, rest = raw[:wide[0] + 1], raw[wide[0] + 1:]
    rounded = steps - np.rint((steps - rest) / k).astype(np.int64) * k
    rounded = np.unique(rounded[rounded > dense[-1]])
    if rounded[0] >= steps:
        return raw, steps
    return np.concatenate([dense, rounded]), int(rounded[0])


def record_steps(schedule: str, points: int, steps: int, check_every: int = 64) -> np.ndarray:
    """The steps a sweep records (`record_plan`): 0 and `steps` always, `points` in all at most."""
    return record_plan(schedule, points, steps, check_every)[0]


@dataclasses.dataclass(frozen=True)
class Program:
    """Static configuration of a chunk program: everything that keys the compile cache.
    From step `refill_from` on, trajectories run in refilled slots (`record_plan`; the last step:
    all in lockstep); the trajectories run one after another when `sequential`
    (`run_sequential`); the levels are tested after every step instead of by a block's peak and a
    replay when `hits_every_step`; `unroll` GD steps per iteration of the compiled loop
    (`_loop`); all chosen by `with_layout`."""

    model: Any
    levels: tuple[float, ...]
    record_steps: tuple[int, ...]
    check_every: int
    rel_loss: float
    blowup: float
    dtype: str
    loss_below: float = 0.0
    refill_from: int = 0
    sequential: bool = False
    hits_every_step: bool = False
    unroll: int = 1
    optimizer: optimizers.Optimizer = optimizers.Optimizer()
    step_flops: float = 0.0     # one trajectory's gradient (`step_cost`), set with the layout
    quick_compile: bool = False  # one by one: `QUICK_COMPILE_OPTIONS` pay (set with the layout); a program
                                 # that selects features keeps XLA's defaults all the same (`compile_chunk`)
    switches: bool = False      # one by one: each run's depth compiled in (`SWITCH_MIN_FLOPS`; set with the layout)
    deals: bool = False         # batched on CPU: each chunk dealt over every CPU device (`DEAL_MIN_FLOPS`; set with the layout)
    anchors: bool = True        # a model with `drift_from` is observed every `ANCHOR_EVERY` steps (`anchored`; set with the layout)
    decided_by: tuple[int, int] | None = None   # (f, s) level indices: each trajectory also stops once Definition 1
                                                # is decided for its pair (`PAIR_HPS`; `decided`)

    @classmethod
    def from_sweep(cls, sweep, model) -> "Program":
        steps, first = record_plan(sweep.record.schedule, sweep.record.points, sweep.steps, sweep.stop.check_every)
        return cls(model, sweep.record.levels, tuple(int(s) for s in steps), sweep.stop.check_every,
                   sweep.stop.rel_loss, sweep.stop.blowup, sweep.dtype, sweep.stop.loss, first,
                   optimizer=sweep.optimizer)


def anchored(program: Program) -> bool:
    """Whether the block peak observes sigma only at each group's start and bounds it in between
    by the model's `drift_from` (`_steps_with_peak`): a model with the hook, unless its layout
    observes every step (`Program.anchors`)."""
    return program.anchors and hook(program.model, "drift_from") is not None


REFILL_MIN_FLOPS = 1e11
"""The refill phase is compiled in only for a sweep whose work, all runs to the step limit, is
at least this many floating-point operations (seconds of compute): compiling it costs about as
much again as the rest of the chunk program (1-4 s on CPU), more than a small sweep's stragglers."""

DEAL_MIN_FLOPS = 1e11
"""On CPU, a batched sweep of at least this much work (all runs to the step limit) deals each
chunk over every CPU device (`Program.deals`, `DealtExecutable`): each device compiles the
program for its share, and those compiles share the cores as the shares do (azulay-phase on both
cores of a 2-core Xeon: compile 2.6 -> 4.7 s), so a sweep must hold seconds of a core's work to
win the compile back (azulay-phase's 9e12 flops: chunks 39.7 -> 23.2 s; the matrix sensing
benchmark at d = 10, 1.5e11 flops of gradients, more than half its time in the singular values
the count leaves out: 68.3 s on one core -> 36.3 s on two)."""


def chunk_devices(program: Program) -> int | None:
    """The devices a chunk of `program` is laid out for where it deals (`Program.deals`): every
    local device; None (`lockstep_devices`) otherwise."""
    return len(jax.local_devices()) if program.deals else None


@dataclasses.dataclass(frozen=True)
class StepCost:
    """What one trajectory's GD step costs, from XLA's view of its lowered (not compiled) step:
    `flops`, the gradient's floating-point operations (cost analysis), and `library_calls`,
    whether the step (the gradient, and the observation the hitting levels take every step)
    calls a library routine (a custom call: LAPACK's SVD or eigh on CPU), which XLA neither fuses
    nor vectorizes across a batch and whose cost the analysis does not count; `parameters`, the
    number of its parameters' entries, which XLA's own loops (the update) touch every step."""

    flops: float
    library_calls: bool
    parameters: int


def _one_trajectory(program: Program, hp_names, task):
    """The shapes of one trajectory's (params, hp, task), the data the model draws included."""
    key = jax.eval_shape(jax.random.key, 0)
    hp = {name: jax.ShapeDtypeStruct((), np.int32 if name in INTEGER_INPUTS else program.dtype) for name in hp_names}
    full = jax.eval_shape(lambda k, h, t: chunk_task(program, k, h, {n: None for n in h}, t)[0], key, hp, task)
    return jax.eval_shape(program.model.init, key, hp, full), hp, full


def _cpu_sharding() -> jax.sharding.Sharding | None:
    """The first CPU device's sharding, or None (the default backend) where JAX runs without its
    CPU backend (`JAX_PLATFORMS` naming accelerators alone)."""
    try:
        return jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    except RuntimeError:
        return None


def step_cost(program: Program, hp_names, task) -> StepCost:
    """`StepCost` of `program`'s step, the data the model draws included as an input, lowered for
    the CPU whatever the backend: XLA's cost analysis of a lowered program is the CPU client's
    (an accelerator's plugin has none, and would count no flops), so the layout is chosen from
    the same numbers everywhere."""
    cpu = _cpu_sharding()
    params, hp, full = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=cpu),
                                    _one_trajectory(program, hp_names, task))
    gradient = jax.jit(jax.grad(program.model.loss)).lower(params, hp, full)
    observed = jax.jit(functools.partial(_sigma, program)).lower(params, hp, full) if program.levels else None
    return StepCost(flops=float((gradient.cost_analysis() or {}).get("flops", 0.0)),
                    library_calls=any("custom_call" in lowered.as_text()
                                      for lowered in (gradient, observed) if lowered is not None),
                    parameters=sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(params)))


ACCELERATOR_UNROLL = 8
"""GD steps per iteration of a block's compiled loop on an accelerator (`_loop`)."""


SEQUENTIAL_MIN_FLOPS = 5e4
"""On CPU, a sweep whose gradient costs at least this many floating-point operations per
trajectory runs its trajectories one after another (`run_sequential`): each one's step is then
vector and matrix products of its own, which SIMD across trajectories speeds up little, and each
stops at its own step instead of stepping with its chunk's slowest. Measured on one core
(benchmarks/RESULTS.md): gissin-fig6 (8.5e4 flops, stops spread over 2.8x) ran 27 s -> 11 s,
azulay-fig7-1 (4.2e5) 139 s -> 67 s, gissin-fig4 (5e6-1e7) 112 s -> 44 s; azulay-phase (4.2e4,
every run to about the same step) 67 s batched against 91 s one by one. A step that calls a
library routine runs one by one at any cost (`StepCost.library_calls`): linear-net-phase (5e3
flops and an SVD a step for its hitting levels) 152 s batched against 86 s. An accelerator always
runs the batch."""


SMALL_WORK_FLOPS = 1e10
"""On CPU, a sweep whose work, every run to the step limit, is under this many floating-point
operations also runs one by one when its model observes sigma exactly at every step (no
`drift_from`) or it has no levels: its program then holds one copy of the step (no block peak,
no replay) and compiles in about 0.6x the time, which at this size is more than its slower steps
cost, and each run computes only its own steps. Measured on one core of a 2-core Intel Xeon,
compile and run, batched -> one by one: gissin-fig2 (2.7e7 flops) 2.45 -> 1.75 s, two-factor
(9.5e7) 2.55 -> 1.56 s, gissin-gd (6.4e8) 2.65 -> 1.59 s, toy-threshold (2.4e9) 3.74 -> 2.50 s,
toy-depth-ratio (5.9e9) 3.78 -> 3.08 s; gissin-depth-separation (1.5e10) stays batched (4.56 s
against 5.54 s), and so does matrix sensing (`drift_from`; 13.8 s against 15.5 s)."""


CONVERGING_WORK_FACTOR = 3
"""A sweep whose stop rule converges (`rel_loss` or `loss_below`) runs one by one up to this many
times `SMALL_WORK_FLOPS`: its runs stop at steps spread over orders of magnitude (sigma0 log-spaced), a batch steps until its
slowest run stops, and one by one each run computes only its own steps. Measured on one core of
a 2-core Intel Xeon with the compilation cache off, compile + run, batched -> one by one:
toy-momentum (2.6e10 flops, executed / needed 7.96 -> 1.00) 4.63 + 1.63 -> 1.79 + 1.89 s;
gissin-depth-separation (1.5e10; 1.59 -> 1.00) 3.50 + 1.32 -> 0.96 + 3.86 s and 2.90 + 1.30 ->
0.82 + 3.63 s, the same first-hitting and stop steps."""


def with_layout(program: Program, hp_names, task, n_runs: int) -> Program:
    """`program` with its layout chosen from its step's cost (`step_cost`):

    - refill: dropped (all in lockstep, `refill_from` at the last step) when refilling cannot pay:
      its stop rule never converges (`rel_loss` and `loss_below` 0: only a diverged run would free
      a slot early), its sweep's work is under `REFILL_MIN_FLOPS`, or it runs on an accelerator,
      where a block costs its kernel launches and loop tests whatever its rows (one H200:
      gissin-fig6's chunk ran in 0.178 s refilled or not, compiled in 5.45 s with the refill
      phase against 1.95 s without). The results are the same bit for bit either way (the
      recorded and checked steps do not change), only the time differs.
    - sequential: on CPU, a gradient that costs at least `SEQUENTIAL_MIN_FLOPS`, a step that
      calls a library routine, or a sweep of less work than `SMALL_WORK_FLOPS` (times
      `CONVERGING_WORK_FACTOR` where its stop rule converges, as its runs may stop far apart)
      whose model has no `drift_from` or that has no levels (no peak to bound).
    - quick compile: a one-by-one program whose step is its products (the first two reasons)
      in a sweep of less work than `QUICK_COMPILE_MAX_FLOPS` or of at most
      `QUICK_COMPILE_MAX_PARAMETERS` parameters (`QUICK_COMPILE_OPTIONS`).
    - switches: a one-by-one sweep of at least `SWITCH_MIN_FLOPS` of work compiles in each run's
      depth, whatever the chunks hold.
    - deals: on CPU, a batched sweep of at least `DEAL_MIN_FLOPS` of work deals each chunk over
      every CPU device.
    - anchors: dropped for a one-by-one sweep of less work than the small-work bound above, which
      observes a `drift_from` model at every step: the anchored peak's replay is a second copy of
      the step, whose compile (1.7-1.8 s on one core for gidel-fig1 and gidel-fig2, 6 runs of a
      linear network each) outweighs the observations it saves in so little work (gidel-fig1
      3.5 s end to end against 4.5 s anchored, gidel-fig2 5.0 s against 6.4 s), while with more
      work they pay (linear-net-phase's Gaussian-init sweep, 2e11 flops: `LinearNet.drift_from`).
    - on an accelerator: the levels tested after every step (`hits_every_step`, for a model
      without `drift_from`) and `ACCELERATOR_UNROLL` steps per loop iteration.
    A function of the sweep and the backend alone, so every chunk size computes each trajectory
    the same way."""
    steps = program.record_steps[-1]
    converges = program.rel_loss > 0 or program.loss_below > 0
    cpu = jax.default_backend() == "cpu"
    refills = cpu and program.refill_from < steps and converges
    cost = step_cost(program, hp_names, task)
    work = n_runs * steps * cost.flops
    exact = hook(program.model, "drift_from") is None
    small = work < SMALL_WORK_FLOPS * (CONVERGING_WORK_FACTOR if converges else 1)
    products = cost.flops >= SEQUENTIAL_MIN_FLOPS or cost.library_calls
    sequential = cpu and (products or (small and (exact or not program.levels)))
    return dataclasses.replace(program, sequential=sequential, hits_every_step=not cpu and exact,
                               anchors=not (sequential and small),
                               unroll=1 if cpu else ACCELERATOR_UNROLL, step_flops=cost.flops,
                               quick_compile=sequential and products and (
                                   work < QUICK_COMPILE_MAX_FLOPS or cost.parameters <= QUICK_COMPILE_MAX_PARAMETERS),
                               switches=sequential and work >= SWITCH_MIN_FLOPS,
                               deals=cpu and not sequential and work >= DEAL_MIN_FLOPS,
                               refill_from=program.refill_from if refills and work >= REFILL_MIN_FLOPS else steps)


@struct.dataclass
class TrajectoryState:
    params: Any
    opt_state: Any
    hit: jax.Array        # (k, n_levels): first step with sigma_i >= level * sigma*_i, -1 before
    chosen: jax.Array     # (n,): first step the model counts feature i as selected, -1 before ((0,): none)
    loss0: jax.Array      # loss at initialization, the scale for the stop tests
    steps_run: jax.Array  # steps whose result is in `params`
    diverged: jax.Array
    converged: jax.Array


def _sigma(program: Program, params, hp, task):
    return program.model.observe(params, hp, task)["sigma"]


def _reached(program: Program, sigma, task):
    """sigma_i >= levels[l] * sigma*_i, shape (k, n_levels)."""
    thresholds = jnp.asarray(program.levels, sigma.dtype)[None, :] * task["sigma_star"][:, None].astype(sigma.dtype)
    return sigma[:, None] >= thresholds


def _update_hits(program: Program, hit, params, hp, task, step):
    """hit[i, l] <- step where it is still -1 and sigma_i >= levels[l] * sigma*_i."""
    if not program.levels:
        return hit
    reached = _reached(program, _sigma(program, params, hp, task), task)
    return jnp.where((hit < 0) & reached, jnp.asarray(step, STEP_DTYPE), hit)


def _selected(program: Program, params, hp, task):
    """The model's `selected` (features counted as chosen now, bool (n,)), or none ((0,))."""
    selected = hook(program.model, "selected")
    return jnp.zeros((0,), bool) if selected is None else selected(params, hp, task)


def _update_chosen(program: Program, chosen, params, hp, task, step):
    """chosen[i] <- step where it is still -1 and feature i is selected now."""
    if chosen.shape[0] == 0:
        return chosen
    return jnp.where((chosen < 0) & _selected(program, params, hp, task), jnp.asarray(step, STEP_DTYPE), chosen)


def init_state(program: Program, key, hp, task) -> TrajectoryState:
    model = program.model
    params = model.init(key, hp, task)
    opt_state = program.optimizer.transformation(hp, program.dtype).init(params)
    n_values = _sigma(program, params, hp, task).shape[0]
    hit = jnp.full((n_values, len(program.levels)), -1, STEP_DTYPE)
    hit = _update_hits(program, hit, params, hp, task, 0)
    chosen = jnp.full(_selected(program, params, hp, task).shape, -1, STEP_DTYPE)
    chosen = _update_chosen(program, chosen, params, hp, task, 0)
    false = jnp.zeros((), bool)
    return TrajectoryState(params, opt_state, hit, chosen, model.loss(params, hp, task),
                           jnp.zeros((), STEP_DTYPE), false, false)


def _gd_step(program: Program, params, opt_state, hp, task):
    """One step of the sweep's optimizer (`optimizers`; plain gradient descent by default) on the
    model's loss (`jax.grad`)."""
    optimizer = program.optimizer.transformation(hp, program.dtype)
    updates, opt_state = optimizer.update(jax.grad(program.model.loss)(params, hp, task), opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def _loop(n, step, carry, unroll: int):
    """`lax.fori_loop(0, n, step, carry)` with `unroll` steps written out in each iteration of the
    compiled loop, then the last n % unroll one at a time: the same steps in the same order. On an
    accelerator the written-out steps of an elementwise model fuse into one kernel, and the loop
    tests (a device-to-host copy and a wait each, for a trip count not known when compiling) are
    1 / unroll as many."""
    if unroll == 1:
        return jax.lax.fori_loop(0, n, step, carry)

    def group(g, carry):
        for j in range(unroll):
            carry = step(g * unroll + j, carry)
        return carry

    carry = jax.lax.fori_loop(0, n // unroll, group, carry)
    return jax.lax.fori_loop(n - n % unroll, n, step, carry)


def _steps_with_peak(program: Program, state: TrajectoryState, hp, task, start, n):
    """GD steps start .. start+n-1 (`n` one count for the whole batch, `start` the trajectory's
    own); selections are kept exactly. With levels, the steps run in groups of `group_steps`, and
    each group keeps what a replay of it needs (`ReplayGroups`): the state it starts from, which
    levels sigma had reached there (`_reached`), and the running maximum of sigma_i /
    sigma*_i over the states after its steps (one max per value and step). A level not reached at
    a group's start that its maximum reaches may have been first reached in that group
    (`_group_may_reach`). A block's first group counts as reached the levels hit before it. A
    model that observes sigma exactly at every step runs the block as one group. For a model with
    `drift_from`, sigma is observed exactly only at a group's start (the anchor, A) and bounded
    after each of its steps by sigma_i(A) + drift, the model's bound on how far any sigma_i can
    have moved from A (for singular values Weyl's |sigma_i(W) - sigma_i(W_A)| <= ||W - W_A||_F);
    the bound is never below sigma_i, so the maximum can err only towards a replay. Returns
    (params, opt_state, chosen, groups or None), the groups with a leading axis of `group_count`."""
    def plain(i, carry):
        params, opt_state, chosen = carry
        params, opt_state = _gd_step(program, params, opt_state, hp, task)
        return params, opt_state, _update_chosen(program, chosen, params, hp, task, start + i + 1)

    carry = (state.params, state.opt_state, state.chosen)
    if not program.levels:
        return (*_loop(n, plain, carry, program.unroll), None)
    dtype = state.loss0.dtype
    inverse_target = 1.0 / task["sigma_star"].astype(dtype)
    no_peak = jnp.full(state.hit.shape[:1], -jnp.inf, dtype)

    def with_peak(first, bound):
        def step(i, carry):
            *moved, peak = carry
            moved = plain(first + i, moved)
            return (*moved, jnp.maximum(peak, bound(moved[0]) * inverse_target))
        return step

    if not anchored(program):
        *moved, peak = _loop(n, with_peak(0, lambda p: _sigma(program, p, hp, task)), (*carry, no_peak), program.unroll)
        return (*moved, jax.tree.map(lambda x: x[None], ReplayGroups(None, None, state.hit >= 0, peak)))
    size = group_steps(program)

    def group(g, carry):
        params, opt_state, chosen, groups = carry
        sigma, drift = _sigma(program, params, hp, task), program.model.drift_from(params, hp, task)
        step = with_peak(g * size, lambda p: sigma + drift(p))
        *moved, peak = _loop(jnp.minimum(size, n - g * size), step, (params, opt_state, chosen, no_peak), program.unroll)
        reached = jnp.where(g == 0, state.hit >= 0, _reached(program, sigma, task))
        this = ReplayGroups(params, opt_state, reached, peak)
        return (*moved, jax.tree.map(lambda buf, x: buf.at[g].set(x), groups, this))

    empty = ReplayGroups(state.params, state.opt_state, state.hit >= 0, no_peak)
    groups = jax.tree.map(lambda x: jnp.zeros((group_count(program), *x.shape), x.dtype), empty)
    return jax.lax.fori_loop(0, (n + size - 1) // size, group, (*carry, groups))


@struct.dataclass
class ReplayGroups:
    """What `_steps_with_peak` keeps of each group of a block, for its replay."""

    params: Any           # the state the group starts from (None: the block's, for a block of one group)
    opt_state: Any
    reached: jax.Array    # (k, n_levels): sigma_i >= levels[l] * sigma*_i at the group's start (the first: hit)
    peak: jax.Array       # (k,): the largest sigma_i / sigma*_i (or its bound) after its steps


ANCHOR_EVERY = 16
"""Steps of a group (`_steps_with_peak`) for a model with `drift_from`: sigma is observed exactly
at each group's start, and a group that may hold a first hit is replayed alone (`_advance_chunk`).
Measured on one core, matrix sensing d = 10 with hits at 3 levels, 1,536 trajectories x 2,000
steps in chunks of 64 (traj-steps/s; executed / needed): 1.8e5 (1.13) at 8, 1.8e5 (1.21) at 16,
1.6e5 (1.32) at 32; replaying the whole block instead of the group, 1.25e5 (1.39) at 16 in the
same hour. The first-hitting steps are the same whatever the group: a looser bound only replays
more."""


def group_steps(program: Program) -> int:
    """Steps of a group of a block: `ANCHOR_EVERY` where the peak is `anchored`, whose replays
    observe sigma exactly (an SVD) at every step; the whole block for one that observes it
    exactly at every step anyway, whose replays cost little beside the gathers and loop tests a
    group adds (the toy benchmark: 16-step groups ran 1.4x slower, replays included)."""
    return ANCHOR_EVERY if anchored(program) else program.check_every


def group_count(program: Program) -> int:
    """Groups of `group_steps` in a block of `check_every` steps (the last one may be short)."""
    return -(-program.check_every // group_steps(program))


def _steps_with_hits(program: Program, state: TrajectoryState, hp, task, start, n):
    """GD steps start .. start+n-1, the first-hitting steps updated after every step (exact)."""
    def step(i, carry):
        params, opt_state, hit, chosen = carry
        params, opt_state = _gd_step(program, params, opt_state, hp, task)
        return (params, opt_state, _update_hits(program, hit, params, hp, task, start + i + 1),
                _update_chosen(program, chosen, params, hp, task, start + i + 1))

    return _loop(n, step, (state.params, state.opt_state, state.hit, state.chosen), program.unroll)


PEAK_MARGIN_ULPS = 8     # sigma * (1 / sigma*) is within 3 ulps of sigma / sigma*: never miss a level


def _group_may_reach(program: Program, hit, group: ReplayGroups):
    """Whether a group of a block may hold the first step at which sigma_i reached a level: not
    hit before the block (`hit`), not reached at the group's start, and reached by the group's
    running maximum of sigma_i / sigma*_i, tested with a margin of a few ulps for the rounding of
    the ratio, so that it can err only towards a replay, never miss a hit."""
    margin = 1.0 - PEAK_MARGIN_ULPS * jnp.finfo(group.peak.dtype).eps
    levels = jnp.asarray(program.levels, group.peak.dtype)[None, :] * margin
    return jnp.any((hit < 0) & ~group.reached & (group.peak[:, None] >= levels))


INTEGER_INPUTS = (*INTEGER_HPS, *PAIR_HPS)
"""The inputs given as int32: the integer axes, and per trajectory the pair (i, j) whose
Definition 1 a program with `Program.decided_by` decides (`model.PAIR_HPS`, a threshold
refinement's points; no axis may take their names)."""


def decided(program: Program, hit, hp):
    """Definition 1 (Gissin et al. 2020) is decided for the pair (i, j) = hp's `PAIR_HPS` once
    sigma_i has reached f sigma*_i or sigma_j has reached s sigma*_j, whichever first: the
    first-hitting steps of later steps cannot change it (`incremental.decide`)."""
    f, s = program.decided_by
    i, j = (hp[name] for name in PAIR_HPS)
    return (hit[i, f] >= 0) | (hit[j, s] >= 0)


def settle(program: Program, state: TrajectoryState, params, opt_state, hit, chosen, hp, task, stop) -> TrajectoryState:
    """The divergence / convergence check at the end of a block ending at `stop`: diverged ->
    restored to the block's start and frozen; converged (every level hit and the loss below
    rel_loss * initial loss or below `loss_below`, or with `Program.decided_by` its pair
    `decided`) -> frozen; frozen stays as it was."""
    loss = program.model.loss(params, hp, task)
    finite = jnp.isfinite(loss) & jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(params)]))
    diverged_now = ~finite | (loss > program.blowup * state.loss0)
    small = (loss <= program.rel_loss * state.loss0) | (loss <= program.loss_below)
    converged_now = jnp.all(hit >= 0) & small
    if program.decided_by is not None:
        converged_now = converged_now | decided(program, hit, hp)
    frozen = state.diverged | state.converged
    keep = frozen | diverged_now
    moved = state.replace(params=params, opt_state=opt_state, hit=hit, chosen=chosen, steps_run=jnp.asarray(stop, STEP_DTYPE))
    new = jax.tree.map(lambda old, cur: jnp.where(keep, old, cur), state, moved)
    return new.replace(diverged=state.diverged | (~frozen & diverged_now),
                       converged=state.converged | (~frozen & ~diverged_now & converged_now))


def record(program: Program, state: TrajectoryState, hp, task):
    """(loss, everything the model observes) of the current parameters."""
    params = state.params
    return program.model.loss(params, hp, task), program.model.observe(params, hp, task)


REPLAY_FRACTION = 16     # a chunk replays at most 1/16 of its rows' groups at once
SPECIALIZED_HPS = ("depth",)   # integer axes whose value, when one per chunk, is compiled in
MAX_SPECIALIZED = 16           # at most this many values (one branch each)


def specialized_axes(constant: dict[str, tuple]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The constant axes compiled in as constants: (name, its values) for each axis of
    `SPECIALIZED_HPS` that is one value per chunk and takes at most `MAX_SPECIALIZED` values."""
    return tuple((name, tuple(int(v) for v in values)) for name, values in constant.items()
                 if name in SPECIALIZED_HPS and len(values) <= MAX_SPECIALIZED)


def _specialized(fn, hps, specialized):
    """fn(hps) with each specialized axis a compile-time constant: `lax.switch` on the chunk's value
    over one branch per value the axis takes (e.g. w**N with a static N is N-1 multiplies)."""
    if not specialized:
        return fn(hps)
    (name, values), rest = specialized[0], specialized[1:]
    index = jnp.sum(jnp.asarray(values, np.int32) < hps[name])    # its position: no search loop
    branches = [functools.partial(lambda v, h: _specialized(fn, {**h, name: np.int32(v)}, rest), v) for v in values]
    return jax.lax.switch(index, branches, hps)


PER_SEED = "per_seed"    # a task entry drawn once per seed of the chunk: row b of the chunk uses slot b % period


def _rows(values: dict, axes: dict, take, period: int | None = None):
    """The rows `take` of the batched entries of a dict (axis 0; per-seed entries at slot
    take % period); unbatched entries as they are."""
    return {k: v if axes[k] is None else v[take % period if axes[k] == PER_SEED else take] for k, v in values.items()}


def _row_axes(axes: dict) -> dict:
    """The vmap axes of `_rows`' result: per-seed entries become per-row."""
    return {k: 0 if a == PER_SEED else a for k, a in axes.items()}


def _marked(axes, marks: dict):
    """A vmap in_axes tuple with the row / per-seed markers replaced (dict entries one by one)."""
    swap = lambda a: marks.get(a, a)  # noqa: E731
    return tuple({k: swap(a) for k, a in ax.items()} if isinstance(ax, dict) else swap(ax) for ax in axes)


def rows_map(fn, in_axes: tuple, period: int | None = None):
    """`jax.vmap(fn, in_axes)` over the rows of a chunk, where an argument (or a dict entry)
    marked `PER_SEED` holds one entry per seed slot: the chunk is `period` seeds cycling fastest
    (row b = g * period + u has slot u), so it runs as a vmap over slots of a vmap over the
    g-groups, and per-seed data stays unbatched inside each slot (a matrix product with the
    group's parameters, not one matrix-vector product per trajectory)."""
    if period is None:
        return jax.vmap(fn, in_axes)
    inner = jax.vmap(fn, _marked(in_axes, {PER_SEED: None}))
    outer = jax.vmap(inner, _marked(in_axes, {0: 1, PER_SEED: 0}), out_axes=1)

    def fold(arg, axes):
        split = lambda x: x.reshape(x.shape[0] // period, period, *x.shape[1:])  # noqa: E731
        if isinstance(axes, dict):
            return {k: split(v) if axes[k] == 0 else v for k, v in arg.items()}
        return jax.tree.map(split, arg) if axes == 0 else arg

    def call(*args):
        out = outer(*(fold(arg, axes) for arg, axes in zip(args, in_axes)))
        return jax.tree.map(lambda x: x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]), out)

    return call


def _anchor_hits(hit, groups: ReplayGroups, lengths, start, size: int, never):
    """The hits known before any replay, `never` where none: those before the block, and a level
    first seen reached at the start of a later group (g >= 1) of the block, at that step. A
    replay of an earlier group finds the crossing at that step or before; where its steps round
    differently from the block's (another program: per-row data, one row), this keeps the level
    from being lost, since every later group counts it as reached and is never replayed for it."""
    count = lengths.shape[0]
    group = jnp.arange(count)[None, :, None, None]
    seen = groups.reached & (group > 0) & (lengths[None, :, None, None] > 0)
    first = jnp.min(jnp.where(seen, group, count), axis=1)                       # (rows, k, levels)
    row_start = start[:, None, None] if jnp.ndim(start) else start
    at = jnp.where(first < count, row_start + first * size, never)
    return jnp.minimum(jnp.where(hit < 0, never, hit), at.astype(hit.dtype))


def _advance_chunk(program: Program, state: TrajectoryState, hps, hp_axes, task, task_axes, start, n,
                   specialized=(), period=None, capacity=1) -> tuple[TrajectoryState, jax.Array]:
    """Every trajectory of a batch from its step `start` (one for the batch, or one per row) by
    `n` steps (one count for the batch), first-hitting steps exact; and the trajectory-steps
    computed (`EXECUTED_DTYPE`).

    The block runs once keeping, per group of `group_steps`, its start and the running
    maximum of sigma (`_steps_with_peak`, cheap); every group of a live trajectory that may hold a
    first hit (`_group_may_reach`) is run again from its start with a per-step hit test, for that
    group alone. The replays are gathered into sub-batches of `capacity` (row, group) pairs
    (`replay_capacity`), as many rounds as needed, and each level's first hit is the earliest found
    in any of the row's groups; the block keeps its own steps and takes only hits from a replay,
    so a trajectory's path never depends on where it was replayed. Each trajectory's result
    depends on itself alone, never on which others share its batch.
    A batch of one (`run_sequential`), or any batch of a program with `hits_every_step` (an
    accelerator, where the test fuses into the step's kernel), that observes sigma at every step
    anyway (not `anchored`) runs the per-step hit test at once: no peak, no replay, one copy of
    the step in the program."""
    start_axis = 0 if jnp.ndim(start) else None
    batch = state.loss0.shape[0]
    check = rows_map(functools.partial(settle, program), (0, 0, 0, 0, 0, hp_axes, task_axes, start_axis), period)
    if program.levels and (batch == 1 or program.hits_every_step) and not anchored(program):
        every_step = rows_map(functools.partial(_steps_with_hits, program), (0, hp_axes, task_axes, start_axis, None),
                              period)
        params, opt_state, hit, chosen = _specialized(lambda h: every_step(state, h, task, start, n), hps, specialized)
        return check(state, params, opt_state, hit, chosen, hps, task, start + n), jnp.asarray(batch * n, EXECUTED_DTYPE)
    fast = rows_map(functools.partial(_steps_with_peak, program), (0, hp_axes, task_axes, start_axis, None), period)
    params, opt_state, chosen, groups = _specialized(lambda h: fast(state, h, task, start, n), hps, specialized)
    executed = jnp.asarray(batch * n, EXECUTED_DTYPE)
    if not program.levels:          # nothing to hit: no replay
        return check(state, params, opt_state, state.hit, chosen, hps, task, start + n), executed
    count, size = group_count(program), group_steps(program)
    lengths = jnp.clip(n - jnp.arange(count) * size, 0, size)          # 0: past the block's end
    live = ~(state.diverged | state.converged)                          # a frozen row's block is discarded
    may_reach = jax.vmap(jax.vmap(functools.partial(_group_may_reach, program), (None, 0)))
    pending = may_reach(state.hit, groups) & (lengths > 0) & live[:, None]          # (rows, groups)
    exact = jax.vmap(functools.partial(_steps_with_hits, program), (0, hp_axes, _row_axes(task_axes), 0, None))
    never = jnp.iinfo(STEP_DTYPE).max

    steps = jnp.minimum(size, n)        # one count for the batch: a shorter group runs on, its later hits dropped

    def replay(carry):
        pending, earliest, executed = carry
        jobs = jnp.nonzero(pending.reshape(-1), size=capacity, fill_value=batch * count)[0]
        rows, g = jobs // count, jobs % count          # a filler (row `batch`) replays group 0 of the last row, dropped
        row = jnp.minimum(rows, batch - 1)
        if batch == 1:      # `run_sequential` (capacity 1): no gather of the data (XLA then laid it out for
            take, sub_hps, sub_task = slice(None), hps, task     # the gather, 2x slower steps)
        else:
            take, sub_hps, sub_task = row, _rows(hps, hp_axes, row), _rows(task, task_axes, row, period)
        sub_state = jax.tree.map(lambda x: x[take], state)
        if groups.params is not None:       # else the block is one group, which starts from the block's state
            picked = jax.tree.map(lambda x: x[row, g], (groups.params, groups.opt_state))
            sub_state = sub_state.replace(params=picked[0], opt_state=picked[1])
        group_start = (start[take] if start_axis == 0 else start) + g * size
        _, _, found, _ = _specialized(lambda h: exact(sub_state, h, sub_task, group_start, steps), sub_hps, specialized)
        block_end = group_start - g * size + n
        found = jnp.where((found < 0) | (found > _wide(block_end, found)), never, found)
        earliest = earliest.at[rows].min(found, mode="drop")
        executed = executed + capacity * steps.astype(EXECUTED_DTYPE)
        return pending.reshape(-1).at[jobs].set(False, mode="drop").reshape(pending.shape), earliest, executed

    carry = (pending, _anchor_hits(state.hit, groups, lengths, start, size, never), executed)
    _, earliest, executed = jax.lax.while_loop(lambda c: jnp.any(c[0]), replay, carry)
    hit = jnp.where(earliest == never, -1, earliest)
    return check(state, params, opt_state, hit, chosen, hps, task, start + n), executed


def _lockstep(program: Program, state: TrajectoryState, hps, hp_axes, task, task_axes, steps: np.ndarray, observe,
              specialized=(), period=None, capacity=1):
    """The whole batch in step from `steps[0]` to `steps[-1]`, in blocks of at most `check_every`
    steps that end at each of `steps`, where every row is recorded (`observe`); a segment ends
    early once every row is frozen. Returns the state, the records at `steps[1:]` and the
    trajectory-steps computed."""
    bounds = jnp.asarray(np.stack([steps[:-1], steps[1:]], axis=1), STEP_DTYPE)

    def segment(carry, bound):
        def running(c):
            start, st, _ = c
            return (start < bound[1]) & ~jnp.all(st.diverged | st.converged)

        def block(c):
            start, st, executed = c
            n = jnp.minimum(program.check_every, bound[1] - start)
            st, done = _advance_chunk(program, st, hps, hp_axes, task, task_axes, start, n, specialized, period,
                                      capacity)
            return start + n, st, executed + done

        _, state, executed = jax.lax.while_loop(running, block, (bound[0], *carry))
        return (state, executed), observe(state, hps)

    (state, executed), records = jax.lax.scan(segment, (state, jnp.zeros((), EXECUTED_DTYPE)), bounds)
    return state, records, executed


def _refill_phase(program: Program, queue: TrajectoryState, hps, hp_axes, task, task_axes, observe, slots: int,
                  specialized=(), period=None, capacity=1):
    """Continuous batching from `refill_from` (P) to the last step, every row of `queue` at P.

    `slots` rows run at once, each K = `check_every` steps per block at its own step. A slot
    whose trajectory stops (diverged, converged or at the last step) hands it back to the queue and
    takes the next pending one; with a per-seed layout of `period` seeds, slot b serves only the
    queue rows of its seed slot b % period, so its data stays the same. A trajectory is recorded
    at the steps of the plan (P + j K); a stopped one's later records are its final ones.
    Every trajectory is computed as in lockstep (per row, whole `LANES` blocks), so the results
    do not depend on the slot it ran in or on the others it ran beside.

    Returns the queue at its final states, the records (R2, Q, ...) at the plan's steps after P,
    and the trajectory-steps computed."""
    k, first, last = program.check_every, program.refill_from, program.record_steps[-1]
    recorded = np.asarray(program.record_steps)
    r_first, r_last = np.searchsorted(recorded, first) + 1, len(recorded)
    steps_here = jnp.asarray(recorded[r_first:r_last], STEP_DTYPE)
    size = queue.loss0.shape[0]
    columns = period or 1
    per_column = slots // columns
    depth_of_queue = size // columns
    frozen = (queue.diverged | queue.converged).reshape(depth_of_queue, columns)
    column = jnp.arange(columns)
    pending = _longest_first(frozen, hps) * columns + column      # live rows first
    count = jnp.sum(~frozen, axis=0)
    hp_names = [name for name, axis in hp_axes.items() if axis == 0]

    def load(queue, owner):
        """Slot states and hyperparameters of the queue rows `owner` (an idle slot, -1: a frozen
        copy of a row of its own seed slot, computed and discarded)."""
        take = jnp.where(owner >= 0, owner, jnp.arange(slots) % columns)
        slot = jax.tree.map(lambda x: x[take], queue)
        slot = slot.replace(converged=slot.converged | (owner < 0))
        return slot, {**hps, **{name: hps[name][take] for name in hp_names}}

    def next_rows(done, taken):
        """For each slot done: the next pending row of its seed slot, or -1 when none is left."""
        done = done.reshape(per_column, columns)
        position = taken + jnp.cumsum(done, axis=0) - done
        row = pending[jnp.minimum(position, depth_of_queue - 1), column]
        fresh = jnp.where(position < count, row, -1)
        return fresh, done, jnp.minimum(taken + jnp.sum(done, axis=0), count)

    start_rows = jnp.arange(per_column)[:, None]
    owner = jnp.where(start_rows < count, pending[jnp.minimum(start_rows, depth_of_queue - 1), column], -1).reshape(slots)
    taken = jnp.minimum(count, per_column)
    slot, slot_hps = load(queue, owner)
    template = observe(slot, slot_hps)
    records = jax.tree.map(lambda v: jnp.zeros((r_last - r_first, size, *v.shape[1:]), v.dtype), template)
    written = jnp.full((size,), 0, STEP_DTYPE)                 # records written per queue row
    clock = jnp.full((slots,), first, STEP_DTYPE)
    row_of = jnp.zeros((slots,), STEP_DTYPE)

    def block(c):
        queue, records, written, owner, taken, slot, slot_hps, clock, row_of, executed = c
        active = (owner >= 0) & ~(slot.diverged | slot.converged)
        slot, done_steps = _advance_chunk(program, slot, slot_hps, hp_axes, task, task_axes, clock, k, specialized,
                                          period, capacity)
        clock = clock + k
        at_record = active & (clock == steps_here[jnp.minimum(row_of, r_last - r_first - 1)])
        target = jnp.where(at_record, owner, size)
        values = observe(slot, slot_hps)
        records = jax.tree.map(lambda buf, v: buf.at[row_of, target].set(v, mode="drop"), records, values)
        row_of = row_of + at_record
        done = (owner >= 0) & (slot.diverged | slot.converged | (clock >= last))
        back = jnp.where(done, owner, size)
        queue = jax.tree.map(lambda q, v: q.at[back].set(v, mode="drop"), queue, slot)
        written = written.at[back].set(row_of, mode="drop")
        fresh, done_grid, taken = next_rows(done, taken)
        owner = jnp.where(done_grid, fresh, owner.reshape(per_column, columns)).reshape(slots)
        loaded, loaded_hps = load(queue, owner)
        slot = jax.tree.map(lambda new, old: jnp.where(_wide(done, old), new, old), loaded, slot)
        slot_hps = {name: jnp.where(done, loaded_hps[name], slot_hps[name]) if name in hp_names else value
                    for name, value in slot_hps.items()}
        clock = jnp.where(done, first, clock)
        row_of = jnp.where(done, 0, row_of)
        return queue, records, written, owner, taken, slot, slot_hps, clock, row_of, executed + done_steps

    carry = (queue, records, written, owner, taken, slot, slot_hps, clock, row_of, jnp.zeros((), EXECUTED_DTYPE))
    queue, records, written, *_, executed = jax.lax.while_loop(lambda c: jnp.any(c[3] >= 0), block, carry)
    final = observe(queue, hps)
    later = jnp.arange(r_last - r_first)[:, None] >= written[None, :]
    records = jax.tree.map(lambda buf, v: jnp.where(_wide(later, buf), v[None], buf), records, final)
    return queue, records, executed


def learning_steps(hps, size: int, xp=jnp):
    """About how many GD steps each of `size` rows takes to learn from its init, the refill
    queue's key (`_longest_first`) and a dealt chunk's (`DealtExecutable`): Gissin et al.'s time
    to reach a fraction of a target from a small init (THEORY.md 2.1, t_alpha, its leading term
    in the init's scale c, in steps of lr):

        N = 1: 1 / lr      N = 2: (1 + ln(1/c)) / lr      N > 2: (1 + c^(2/N - 1) / (1 - 2/N)) / lr

    with c = sigma0 (1 + s^2) / (1 - s^2) at init shape s (Azulay et al.: shape and scale enter
    only through c, THEORY.md 2.8), ln(1/c) taken as 0 for c >= 1. An axis the sweep lacks takes
    depth 2, sigma0 1, shape 0, lr 1. Only an order: longest processing time first. `xp`: the
    array namespace (`jax.numpy` in a program, NumPy on the host: `DealtExecutable`)."""
    def axis(name, default):
        value = hps.get(name, default)
        return xp.broadcast_to(xp.asarray(value, xp.float32), (size,))

    depth, lr = axis("depth", 2), axis("lr", 1.0)
    shape = xp.abs(axis("shape", 0.0))
    c = axis("sigma0", 1.0) * (1 + shape * shape) / (1 - shape * shape)
    deep = xp.maximum(depth, 3.0)
    power = c ** (2 / deep - 1) / (1 - 2 / deep)
    growth = xp.where(depth > 2, power, xp.where(depth == 2, xp.log(xp.maximum(1 / c, 1.0)), 0.0))
    return (1 + growth) / lr


def _longest_first(frozen, hps):
    """The queue rows of each seed slot (`frozen` (rows per slot, columns), queue row b at (b //
    columns, b % columns)), live ones first, the longest to learn first (`learning_steps`), then
    in their own order; (rows per slot, columns). The order moves no result (a slot computes its
    run as lockstep would), only what the chunk computes: azulay-phase (720 runs in one chunk, 16
    slots per seed; one core of a 2-core Xeon / dealt over both) computed 1.096x / 1.134x the
    trajectory-steps its runs need in the grid's order, whose depth-4 runs of 300,000 steps
    started last; 1.005x / 1.121x ordered by depth, then sigma0, where a shape near 1, learning 20x-
    100x faster at the same depth and sigma0, could start before a balanced one; 1.005x /
    1.062x by `learning_steps` (1.050x with the chunk dealt by work, `deal_by_work`)."""
    rows, columns = frozen.shape
    longest = -learning_steps(hps, frozen.size).reshape(rows, columns)
    return jnp.lexsort((jnp.broadcast_to(jnp.arange(rows)[:, None], frozen.shape), longest, frozen), axis=0)


def _wide(mask, like):
    """`mask` with trailing axes of length 1 up to `like`'s rank (for `jnp.where` over a row's values)."""
    return mask.reshape(mask.shape + (1,) * (jnp.ndim(like) - mask.ndim))


DATA_STREAM = np.uint32(2**32 - 1)     # run ids are int32 >= 0, so the data keys never meet a run's key


def data_key(root_key, seed):
    """The key of the data drawn for one value of the `seed` axis: shared by every trajectory with
    that seed (whatever its depth, sigma0, lr), independent of every run's init key."""
    return jax.random.fold_in(jax.random.fold_in(root_key, DATA_STREAM), seed)


def chunk_task(program: Program, root_key, hps, hp_axes, task, period: int | None = None):
    """The task of a chunk and its vmap axes: the shared arrays, plus what the model draws for
    each value of the `seed` axis (`model.draw(key, task)`, if it has one) inside the program:
    drawn once and unbatched when the chunk has one seed (no seed axis: seed 0); once per seed
    (marked `PER_SEED`) when the chunk is whole cycles of `period` seeds (`rows_map`); else once
    per trajectory (axis 0)."""
    axes = {name: None for name in task}
    draw = hook(program.model, "draw")
    if draw is None:
        return task, axes
    seed = hps.get("seed", np.int32(0))
    one = lambda s: draw(data_key(root_key, s), task)  # noqa: E731
    if hp_axes.get("seed") != 0:
        drawn, axis = one(seed), None
    elif period is not None:
        drawn, axis = jax.vmap(one)(seed[:period]), PER_SEED
    else:
        drawn, axis = jax.vmap(one)(seed), 0
    return task | drawn, axes | {name: axis for name in drawn}


def run_chunk(program: Program, root_key, run_ids, live, hps, task, specialized=(), period=None, capacity=1,
              slots=None, slot_capacity=1):
    """Every trajectory of one chunk from init to the last recorded step. A hyperparameter given
    as a scalar is one value for the whole chunk (unbatched); those in `specialized` ((name,
    values) pairs) are also compiled in as constants for the GD steps. With `period`, the chunk's
    rows cycle through `period` seeds (seed fastest), and the drawn data is kept once per seed.
    Rows not `live` (the fillers of `CompiledChunk.launch`) start frozen, so they never keep the
    chunk running. The chunk runs in lockstep up to the program's `refill_from`, then in `slots`
    refilled slots (`_refill_phase`) to the end (all in lockstep, over the same recorded and
    checked steps, when `slots` is None or not fewer than the rows); `capacity` and
    `slot_capacity` are the hit replays' sub-batches of the two.

    Returns (summary, records): summary arrays of shape (B, ...) (with the model's `summarize`
    scalars of the final parameters, if it has one, and `executed`, the trajectory-steps the
    chunk computed) and records (loss (R, B), the model's observations {"sigma": (R, B, k), name:
    (R, B) or (R, B, n)}) at `program.record_steps`.
    """
    keys = jax.vmap(lambda i: jax.random.fold_in(root_key, i))(run_ids)
    hp_axes = {name: None if jnp.ndim(value) == 0 else 0 for name, value in hps.items()}
    task, task_axes = chunk_task(program, root_key, hps, hp_axes, task, period)
    state = rows_map(functools.partial(init_state, program), (0, hp_axes, task_axes), period)(keys, hps, task)
    state = state.replace(converged=state.converged | ~live)
    batched_record = rows_map(functools.partial(record, program), (0, hp_axes, task_axes), period)
    observe = lambda st, h: batched_record(st, h, task)  # noqa: E731
    steps = np.asarray(program.record_steps)
    first = program.refill_from if slots is not None and slots < len(run_ids) else steps[-1]    # else no refill
    parts = [jax.tree.map(lambda v: v[None], observe(state, hps))]
    state, head, executed = _lockstep(program, state, hps, hp_axes, task, task_axes, steps[steps <= first], observe,
                                      specialized, period, capacity)
    parts.append(head)
    if first < steps[-1]:
        state, rest, refilled = _refill_phase(program, state, hps, hp_axes, task, task_axes, observe, slots,
                                              specialized, period, slot_capacity)
        parts.append(rest)
        executed = executed + refilled
    loss, observed = jax.tree.map(lambda *p: jnp.concatenate(p), *parts)
    summary = {
        "final_loss": loss[-1],
        "diverged": state.diverged,
        "converged": state.converged,
        "steps_run": state.steps_run,
        "hit": state.hit,
        "chosen": state.chosen,
        "executed": executed,
    }
    summarize = hook(program.model, "summarize")
    if summarize is not None:
        summary["scalars"] = rows_map(summarize, (0, hp_axes, task_axes), period)(state.params, hps, task)
    return summary, (loss, observed)


def run_sequential(program: Program, root_key, run_ids, live, hps, task, specialized=()):
    """`run_chunk`'s results for a chunk whose trajectories run one after another: `lax.map` of
    `run_chunk` at a batch of one, its hyperparameters unbatched and its data drawn for its own
    seed (`Program.sequential`). Each trajectory stops at its own check and computes its gradient
    alone; `executed` is the sum over the trajectories."""
    own = {name: value for name, value in hps.items() if jnp.ndim(value)}

    def one(row):
        run_id, alive, values = row
        return run_chunk(program, root_key, run_id[None], alive[None], hps | values, task, specialized)

    summary, records = jax.lax.map(one, (run_ids, live, own))
    executed = jnp.sum(summary.pop("executed"))
    summary = jax.tree.map(lambda v: v[:, 0], summary)
    records = jax.tree.map(lambda v: jnp.moveaxis(v[:, :, 0], 0, 1), records)
    return summary | {"executed": executed}, records


DRAW_SPEED_OPTIONS = {
    # a seed's task is drawn once per seed (baselines, analyses): LLVM's O1 and XLA's older loop
    # emitters compile it in about half the time (one core of a 2-core Xeon: the digits' whitening
    # 0.93 -> 0.47 s, gissin-fig3's data 0.62 -> 0.31 s, matrix sensing's measurements 0.31 ->
    # 0.14 s), the draws as fast. Dropped where XLA lacks an option.
    "xla_backend_optimization_level": 1,
    "xla_cpu_use_fusion_emitters": False,
}


@functools.lru_cache(maxsize=16)
def _task_program(program: Program, task_shapes: tuple):
    """The compiled (root key, seed, task) -> the task of that seed, for a task of `task_shapes`
    (its tree structure and leaves' shapes)."""
    treedef, leaves = task_shapes
    lowered = jax.jit(lambda key, seed, task: chunk_task(program, key, {"seed": seed}, {"seed": None}, task)[0]).lower(
        jax.eval_shape(jax.random.key, 0), jax.ShapeDtypeStruct((), np.int32), jax.tree.unflatten(treedef, leaves))
    return _compile(lowered, {}, DRAW_SPEED_OPTIONS if jax.default_backend() == "cpu" else {})


def draw_task(program: Program, task, seed: int, root_seed: int) -> dict[str, np.ndarray]:
    """The whole task (shared arrays and drawn data) that the trajectories with `seed` see, as
    NumPy arrays: what references and comparators run on."""
    leaves, treedef = jax.tree.flatten(jax.eval_shape(lambda t: t, task))
    full = _task_program(program, (treedef, tuple(leaves)))(jax.random.key(root_seed), np.int32(seed), task)
    return {name: np.asarray(value) for name, value in full.items()}


LANES = 64
"""Trajectories per vector block. XLA's CPU loops run whole blocks of (vector width x unroll)
elements in their vector body, at most 16 x 4 = 64 for float32 on AVX-512 (32 on AVX2, fewer in
float64), and the rest in a scalar tail, where LLVM fuses a different set of a * b + c into FMAs: a
trajectory in a tail rounds differently (2e-5 relative in the toy's loss at depth 3). Every
compiled batch and every replay sub-batch is whole blocks on every device, so none ever is."""
SLOT_ROWS = (8, 16, 32)
"""Rows per seed slot of the per-seed layout below `LANES` (then multiples of `LANES`): powers of
two from 8, whose loops along a slot's rows (matrix sensing keeps the batch last) are whole
vectors; with 2, 4 or 48 rows matrix sensing's singular values and the convolutional network's
correlation differed in their last bits from those of other chunk sizes."""
COMPILER_OPTIONS = {
    # threads would split each loop at batch / threads rows, a tail in every part, per machine
    "xla_disable_hlo_passes": "cpu-parallel-task-assigner",
    # YNNPACK fusions replace XLA's own loops above a size threshold, with other roundings
    "xla_cpu_experimental_ynn_fusion_type": "",
}
SEQUENTIAL_COMPILER_OPTIONS = COMPILER_OPTIONS | {
    # a trajectory alone has one shape whatever the chunk, so YNNPACK may compute each dot:
    # linear_net's steps ran 2.6x faster, and its batched programs changed their roundings with
    # the chunk size (matrix sensing's per-seed products), so those keep XLA's loops
    "xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT",
}
SEQUENTIAL_SPEED_OPTIONS = {
    # XLA's older loop emitters compile a one-by-one program in 0.55-0.85x the time at the same
    # speed (one core of a 2-core Xeon: gidel-fig2 7.4 -> 3.8 s, hacohen-fig4 7.3 -> 4.0 s,
    # azulay-fig7-1 3.6 -> 2.2 s, matrix sensing unchanged); batched elementwise loops ran
    # 4-7x slower with them, so those keep the default, and so does a program that tracks
    # selected features (`selects_features`). Dropped where XLA lacks the option.
    "xla_cpu_use_fusion_emitters": False,
}


QUICK_COMPILE_OPTIONS = {
    # LLVM's O1 pipeline in place of O2, for a one-by-one program whose step is its products
    # (`with_layout`: a gradient of at least SEQUENTIAL_MIN_FLOPS or a library call) where O1's
    # unvectorized elementwise loops cost little: a sweep of little work or a model of few
    # parameters. The step's time is in YNNPACK's dots and LAPACK, which O2's loop passes do not
    # touch; one core of a 2-core Xeon, compile of one chunk program, O2 -> O1: gissin-fig1a (10,000
    # parameters) 2.5 -> 1.2 s, gissin-fig1d 1.9 -> 1.2 s, linear-net-phase 2.0 -> 1.3 s,
    # hacohen-fig12 2.0 -> 1.6 s, gidel-fig2 2.1 -> 1.5 s, the runs as fast; gissin-fig4 end to end
    # 6.3 -> 2.4 s of compile, its sweeps' steps as fast. XLA's own loops (the update of every
    # parameter, the masks) run unvectorized under O1: the 128-wide deep linear networks of
    # hacohen-fig4 (59,000 parameters) stepped 1.1-1.25x slower, a batched program (azulay-phase)
    # 1.65x, a toy model's one-by-one step 1.12x (gissin-depth-separation); those keep O2.
    "xla_backend_optimization_level": 1,
}


QUICK_COMPILE_MAX_FLOPS = 1e11
"""A one-by-one sweep of less work than this (its runs' gradients to the step limit) compiles
with `QUICK_COMPILE_OPTIONS` whatever its parameters: it runs for seconds, where the 0.4-0.7 s its
compile saves weigh about as much as 1.1-1.25x slower elementwise loops would cost (the break-even
is 1.6-7 s of steps, 2e10 to 4e11 flops at the 10-60 GFLOP/s these steps reach on one core)."""

SWITCH_MIN_FLOPS = 1e11
"""A one-by-one sweep of at least this much work (its runs' gradients to the step limit) compiles
in each run's value of the `SPECIALIZED_HPS` (depth) whether or not a chunk holds one value of it
(`compile_chunk`'s `switched`): a `lax.switch` per block picks the branch of the run's depth, so
a shallow run multiplies only the layers it uses instead of the deepest run's, the others masked
(a linear network's padded layer enters as the identity, so its results are the same bits either
way; a model may round a compiled-in depth otherwise, as the convolutional network does). It
costs compile time, one branch per value; above this work the steps it saves weigh more. One core
of a 2-core Xeon, compile + run, masked -> switched: hacohen-fig4's natural digits (depths 1, 2,
5; 1.8e12 flops) 2.69 + 18.43 -> 3.04 + 8.89 s; linear-net-phase's Gaussian init (1,080 runs, 5
depths) 1.70 + 26.91 -> 2.37 + 25.08 s; below it, gidel-fig2 (6 runs) 1.66 + 0.50 -> 2.15 + 0.50 s."""

QUICK_COMPILE_MAX_PARAMETERS = 16_384
"""A one-by-one sweep of a model with at most this many parameter entries compiles with
`QUICK_COMPILE_OPTIONS` whatever its work: its elementwise loops are a small part of a step that
is its products (matrix sensing's four 50 x 50 layers, 10,000 entries: 1.1 ms a step either way)."""


def selects_features(program: Program, hp_names, task) -> bool:
    """Whether the model counts features as selected (`selected`, an (n,) mask, n > 0), which
    the engine tracks after every step: a select over n int32 first-selection steps that XLA's
    older loop emitters (`SEQUENTIAL_SPEED_OPTIONS`) compile to a scalar loop. gissin-fig3's step
    (d = 1000 features, one core of a 2-core Xeon, 8 runs x 5,000 steps): 12.2-16.0 us with them,
    8.5-11.0 us without, for a compile 1.5 s longer."""
    params, hp, full = _one_trajectory(program, hp_names, task)
    return jax.eval_shape(functools.partial(_selected, program), params, hp, full).shape[0] > 0


def seed_slots(model, axes: dict[str, np.ndarray]) -> tuple[int, ...] | None:
    """The seed values of the per-seed layout (`rows_map`: the data drawn once per seed, and each
    step one matrix product per seed), or None (data per trajectory). A function of the sweep
    alone, so every chunk size computes a trajectory the same way: the layout is used when the
    model draws data and the seed axis is the last (fastest) of `grid.build`'s layout with
    several values."""
    seeds = axes.get("seed", ())
    if hook(model, "draw") is None or len(seeds) < 2 or list(axes)[-1] != "seed":
        return None
    return tuple(int(s) for s in seeds)


def small_sweep_batch(n_runs: int, period: int | None = None) -> int | None:
    """The batch of a sweep smaller than one vector block (at most `LANES` runs; with a per-seed
    layout of `period` seeds, at most `SLOT_ROWS[0]` runs per seed): its own size, each run at
    the position of its run id in every chunk program, so no chunk size puts a run at another
    position and no filler block is computed; at least two rows, since one row under vmap is how
    a one-by-one program runs a trajectory, which a model may compute otherwise than a batch (the
    contract does not forbid it), whatever the device count. None for a larger sweep."""
    limit = period * SLOT_ROWS[0] if period else LANES
    return max(n_runs, 2) if n_runs <= limit else None


def compiled_batch(size: int, period: int | None = None, devices: int | None = None, small: int | None = None) -> int:
    """The batch compiled for chunks of `size` run ids: whole `LANES` blocks on each of `devices`
    (default: the `lockstep_devices`); with a per-seed layout of `period` seeds, whole cycles on
    each device with a number of rows per seed from `SLOT_ROWS` or a multiple of `LANES`, enough
    for a chunk that starts at any seed slot. A small sweep (`small_sweep_batch`) is its `small`
    rows, on one device whatever the count."""
    if small:
        return small
    devices = devices or len(lockstep_devices())
    if not period:
        return -(-size // (devices * LANES)) * devices * LANES
    rows = -(-(size + (period - 1 if size % period else 0)) // period)       # per seed, at most
    per_device = -(-rows // devices)
    slot_rows = next((r for r in SLOT_ROWS if r >= per_device), -(-per_device // LANES) * LANES)
    return devices * period * slot_rows


SLOT_SHARE = 8
"""A chunk without a per-seed layout runs its refill phase in 1/`SLOT_SHARE` as many slots as it
has trajectories (whole `LANES` blocks per device): a slot serves several trajectories one after
another, and the last ones of a chunk, which run while the pending ones are gone, keep at most
that share of the chunk busy."""


SEED_SLOTS = 16
"""Slots per seed of the refill phase with a per-seed layout (one of `SLOT_ROWS`, so a seed's
slots are whole vectors, as in lockstep). A seed's slots share its data, and each step multiplies
that data by their parameters, one product per seed, in XLA's own dot loops (`COMPILER_OPTIONS`),
which are slow for few columns: a product with gissin-fig3's 80 x 1000 examples and back cost, per
column (one core of a 2-core Xeon), 9.5 us alone, 58 us with 2 columns, 22 with 4, 11.9 with 8,
6.6 with 16, 4.2 with 32. More slots per seed leave more of a seed's stragglers beside idle slots.
azulay-phase (2 seeds, 360 runs each), 8 -> 16 -> 32 slots per seed: its chunks in 97.6-101.7 ->
73.4-80.8 -> 76.3-82.8 s (runs alternated), executed / needed trajectory-steps 1.005 -> 1.096 ->
1.194; alternated again in a quieter hour, 8 -> 16 slots: 76.5-77.5 -> 66.0-66.4 s (1.16x)."""


def slot_count(batch: int, period: int | None = None, devices: int | None = None) -> int:
    """Slots of the refill phase of a chunk program compiled for `batch` rows: with a per-seed
    layout of `period` seeds, `SEED_SLOTS` per seed on each device; else 1/`SLOT_SHARE` of the
    batch in whole `LANES` blocks per device. Never more than the batch."""
    devices = devices or len(lockstep_devices())
    if period:
        return min(batch, period * SEED_SLOTS * devices)
    block = devices * LANES
    return min(batch, max(block, batch // SLOT_SHARE // block * block))


def replay_capacity(batch: int, block: int) -> int:
    """(row, group) pairs of a replay sub-batch: 1/`REPLAY_FRACTION` of the batch rounded down to
    whole `block`s (`LANES` on each device), at least one block."""
    return max(block, batch // REPLAY_FRACTION // block * block)


def _placement(n: int, batch: int, offset: int, period: int | None) -> np.ndarray:
    """The chunk row that each position of a compiled batch computes: rows 0 .. n-1 at positions
    offset .. offset+n-1; elsewhere a filler, a copy of the chunk's first row of the position's
    seed slot (b % period) or, where the chunk has none, of row 0 (its seed is then the slot's);
    without a per-seed layout, a copy of the last row."""
    shifted = np.arange(batch) - offset
    if not period:
        return np.clip(shifted, 0, n - 1)
    same_slot = shifted % period
    return np.where((shifted >= 0) & (shifted < n), shifted, np.where(same_slot < n, same_slot, 0))


SHARD_CPU_BATCHES = False
"""Whether a batched chunk program on CPU is sharded over every CPU device, as on accelerators
(`lockstep_devices`); off: the simulated devices of the tests turn it on."""


def lockstep_devices() -> list:
    """The devices a batched chunk program shards its batch over: every local device of an
    accelerator, the first alone on CPU. Sharded there (one program partitioned over the
    devices), each device's whole blocks and refill slots grew the work more than a second core
    gained: azulay-phase's chunk of 720 runs took 89 s on one device and 77 s on two, computing
    1.194x the trajectory-steps its runs need instead of 1.096x; and gissin-depth-separation's
    threshold refinement, batched while its points ran to the run's stop rule, ran 1.7x slower.
    The CPU's cores go to dealt chunks instead (`DealtExecutable`: one-by-one programs past
    `deal_count`'s work, batched ones with `Program.deals`), each device computing its share
    alone, and to writing one chunk while the next computes."""
    devices = jax.local_devices()
    return devices if SHARD_CPU_BATCHES or jax.default_backend() != "cpu" else devices[:1]


def deal_count(program: Program, batch: int) -> int:
    """The devices a one-by-one chunk of `batch` rows deals its runs over (`DealtExecutable`):
    every local device once the chunk's work (rows x steps x the gradient's flops) reaches
    `SMALL_WORK_FLOPS`, else one. Dealing costs 0.1-0.25 s of compile (gissin-fig2's program,
    2.7e7 flops of work, on both cores of a 2-core Xeon: 0.35 s on one device, 0.47-0.49 s
    lowered and compiled for each of two), which only a chunk of that much work wins back."""
    work = batch * program.record_steps[-1] * max(program.step_flops, 1.0)
    return len(jax.local_devices()) if work >= SMALL_WORK_FLOPS else 1


def _batch_mesh(devices) -> jax.sharding.Mesh:
    """A 1-D mesh of `devices` over the chunk's rows (axis "batch")."""
    return jax.sharding.Mesh(np.array(devices), ("batch",))


def deal_by_work(work: np.ndarray, count: int) -> list[np.ndarray]:
    """The units of `work` (their predicted costs) dealt over `count` devices, as many to each:
    longest first, each to the device with the least work so far among those with room (Graham's
    LPT rule; ties to the first device, equal works in unit order); each device's units in
    their own order."""
    room, uneven = divmod(len(work), count)
    if uneven:
        raise ValueError(f"{len(work)} units do not deal evenly over {count} devices")
    loads, shares = np.zeros(count), [[] for _ in range(count)]
    for unit in np.argsort(-np.asarray(work, np.float64), kind="stable"):
        device = min((k for k in range(count) if len(shares[k]) < room), key=lambda k: loads[k])
        loads[device] += work[unit]
        shares[device].append(unit)
    return [np.sort(np.asarray(share, np.int64)) for share in shares]


@dataclasses.dataclass(frozen=True)
class DealtExecutable:
    """A chunk program whose batch is dealt over `devices` `unit` positions at a time by their
    work (`deal_by_work` of each unit's live rows' `learning_steps`, at most `steps` each:
    gissin-fig4's four depths, stopping at 2,656 to 28,832 steps, dealt in turn gave the two
    cores 22.5k and 37.8k steps, by work 31.5k and 28.8k), each device computing its share with
    `executables[k]`: the same program (the same lowered module and compile options) compiled
    for each device, at the share's batch. A one-by-one program deals rows (`unit` 1), each run
    one after another; a batched program deals its vector blocks' rows (`unit` 1) or, with a
    per-seed layout, whole cycles of seed slots (`unit` the period), so each share is a batch of
    the same layout. A program partitioned over the devices (`jax.shard_map`) was compiled with
    other fusions than one device's and rounded differently (docs/architecture.md, "Every
    core"); one module compiled per device computes each trajectory as one device does, bit for
    bit, wherever it is dealt. Calling it dispatches every device's share and returns at once
    (`Dealt`)."""

    executables: tuple
    devices: tuple
    steps: int
    unit: int = 1

    def __call__(self, root_key, run_ids, live, hps, task) -> "Dealt":
        size = len(run_ids)
        with np.errstate(all="ignore"):   # float32: a sigma0 rounded to 0 takes every step, a shape rounded to 1 none
            work = np.where(live, np.fmin(learning_steps(hps, size, np), self.steps), 0.0)
        units = np.arange(size).reshape(-1, self.unit)
        shares, placed = [], []
        for share, executable, device in zip(deal_by_work(work.reshape(-1, self.unit).sum(1), len(self.devices)),
                                             self.executables, self.devices):
            rows = units[share].reshape(-1)
            own = {name: value if np.ndim(value) == 0 else value[rows] for name, value in hps.items()}
            shares.append(executable(*jax.device_put((root_key, run_ids[rows], live[rows], own, task), device)))
            placed.append(rows)
        return Dealt(tuple(shares), tuple(placed))


@dataclasses.dataclass(frozen=True)
class Dealt:
    """The per-device results of a `DealtExecutable` and the batch rows each share holds, put
    back in row order by `gathered`."""

    shares: tuple
    rows: tuple

    def gathered(self) -> tuple[dict, Any]:
        """(summary, records) as one device's program returns them: each share's rows put back at
        their positions, `executed` summed over the devices."""
        order = np.argsort(np.concatenate(self.rows))

        def join(axis):
            def put(*parts):         # (.., rows of a share, ..) x devices -> (.., batch, ..)
                return np.take(np.concatenate([np.asarray(part) for part in parts], axis=axis), order, axis=axis)
            return put

        summaries = [dict(summary) for summary, _ in self.shares]
        executed = sum(float(summary.pop("executed")) for summary in summaries)
        summary = jax.tree.map(join(0), *summaries)
        records = jax.tree.map(join(1), *[records for _, records in self.shares])
        return summary | {"executed": executed}, records


@dataclasses.dataclass
class CompiledChunk:
    """A chunk program compiled for one batch size; the hyperparameters named in `constant` are
    one value per chunk and enter the program unbatched (a scalar). With `seeds` (`seed_slots`),
    position b of the batch is seed slot b % len(seeds) and the drawn data is kept once per seed.

    `launch` places the chunk's rows in the batch (a chunk starting at slot u sits at positions
    u, u+1, ...) and fills the other positions with frozen copies (`_placement`), so any run of
    consecutive run ids computes each trajectory as every other chunking does; it dispatches and
    returns at once (JAX dispatch is asynchronous), so the host can write the previous chunk while
    this one computes; `fetch` waits and returns NumPy arrays of the chunk's rows. Calling the
    object does both."""

    program: Program
    batch: int
    executable: Any
    compile_seconds: float
    root_key: Any
    constant: dict[str, tuple] = dataclasses.field(default_factory=dict)
    seeds: tuple[int, ...] | None = None
    small: int | None = None

    def launch(self, run_ids: np.ndarray, hps: dict[str, np.ndarray], task,
               offset: int | None = None) -> tuple[tuple[int, int], Any]:
        """`offset`: the position of the first row, by default its run id's slot (a chunk of
        consecutive run ids); rows that are not (a threshold refinement's points, each with the
        run id of its thresholds row, in a program without a per-seed layout) are placed from
        `offset`, where each is computed as anywhere else: its init key is its run id."""
        run_ids = np.asarray(run_ids)
        n = len(run_ids)
        hps = cast_hps(hps, self.program.dtype)
        varying = [k for k in self.constant if np.any(hps[k] != hps[k][0])]
        if varying:
            raise ValueError(f"{varying} vary within a chunk of a program compiled with them constant")
        unknown = {k: hps[k][0] for k, values in self.constant.items() if hps[k][0] not in values}
        if unknown:
            raise ValueError(f"{unknown} not among the values the program was compiled for")
        period = len(self.seeds) if self.seeds else None
        if offset is None:
            offset = int(run_ids[0]) % (self.small or period or 1)      # seed is the fastest axis
        if not 0 < offset + n <= self.batch:
            raise ValueError(f"a chunk of {n} rows from slot {offset} does not fit the batch of {self.batch}")
        cycle = np.asarray(self.seeds or (), np.int32)
        if period and not np.array_equal(hps["seed"], cycle[(offset + np.arange(n)) % period]):
            raise ValueError(f"a chunk of a program compiled for cycles of seeds {self.seeds} has other rows")
        rows = _placement(n, self.batch, offset, period)
        batch_hps = {k: v[0] if k in self.constant else v[rows] for k, v in hps.items()}
        if period:
            batch_hps["seed"] = np.resize(cycle, self.batch)
        live = np.zeros(self.batch, bool)
        live[offset:offset + n] = True
        return (offset, n), self.executable(self.root_key, run_ids[rows].astype(np.int32), live, batch_hps, task)

    @staticmethod
    def fetch(launched: tuple[tuple[int, int], Any]) -> tuple[dict, tuple]:
        """The chunk's rows of a launched program's results (and `executed`, the trajectory-steps
        its whole batch computed, fillers and replays included)."""
        (offset, n), results = launched
        summary, records = results.gathered() if isinstance(results, Dealt) else results
        rows = slice(offset, offset + n)
        summary = {name: float(value) if name == "executed" else jax.tree.map(lambda v: np.asarray(v)[rows], value)
                   for name, value in summary.items()}
        records = jax.tree.map(lambda r: np.asarray(r)[:, rows], records)
        return summary, records

    def __call__(self, run_ids: np.ndarray, hps: dict[str, np.ndarray], task, offset: int | None = None) -> tuple[dict, tuple]:
        return self.fetch(self.launch(run_ids, hps, task, offset))


def cast_hps(hps: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """Integer axes (and `PAIR_HPS`) as int32, every other axis in the sweep's float dtype."""
    return {k: np.asarray(v, np.int32 if k in INTEGER_INPUTS else dtype) for k, v in hps.items()}


def _abstract_args(program: Program, batch: int, hp_names, task, constant=()):
    hps = {k: jax.ShapeDtypeStruct(() if k in constant else (batch,), np.int32 if k in INTEGER_INPUTS else program.dtype)
           for k in hp_names}
    return (jax.eval_shape(jax.random.key, 0), jax.ShapeDtypeStruct((batch,), np.int32),
            jax.ShapeDtypeStruct((batch,), bool), hps, task)


PROBE_BATCH = 64
HOST_COPIES = 4      # results on the host: the NumPy copy, float64 tables, the Parquet buffer


STATE_COPIES = 16    # a bound on the copies of a trajectory's state a chunk program holds (phases, replays, gradients)
ROUGH_SHARE = 4      # the rough bound is trusted while it stays under 1/4 of the budget


def _tree_bytes(tree) -> int:
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree))


def trajectory_shapes(program: Program, hp_names, task) -> tuple[TrajectoryState, dict, tuple]:
    """The shapes of one trajectory's state at init, its summaries (the model's `summarize`, {}
    without one) and one record (`record`: the loss and the observations), the data the model
    draws included (`_one_trajectory`); traced (`jax.eval_shape`), never compiled, and much cheaper
    than tracing the chunk program: its gradient and loops are left out."""
    summarize = hook(program.model, "summarize")

    def one(key, hp, task):
        state = init_state(program, key, hp, task)
        return state, {} if summarize is None else summarize(state.params, hp, task), record(program, state, hp, task)

    _, hp, full = _one_trajectory(program, hp_names, task)
    return jax.eval_shape(one, jax.eval_shape(jax.random.key, 0), hp, full)


def state_bytes(program: Program, hp_names, task) -> int:
    """Bytes of one trajectory's state (parameters, optimizer state, hits, stop flags), from
    `trajectory_shapes`."""
    return _tree_bytes(trajectory_shapes(program, hp_names, task)[0])


def lockstep_state_bytes(program: Program, hp_names, task) -> int:
    """`state_bytes` of a program whose trajectories all run batched in lockstep, the size that
    bounds its chunks on CPU (`max_chunk`); 0 (no bound) for one that runs them one by one, or
    that refills slots, whose working set is its slots (`slot_count`, a share of the chunk)."""
    if program.sequential or program.refill_from < program.record_steps[-1]:
        return 0
    return state_bytes(program, hp_names, task)


def rough_bytes(program: Program, hp_names, task, seeds: int = 1) -> tuple[int, int]:
    """A bound on a chunk program's memory without compiling it, (fixed, per trajectory): the task
    and the data drawn for each of `seeds` seeds, and per trajectory its outputs (device and
    `HOST_COPIES`: its records, and its summary, bounded by its state, which holds the stop flags,
    the step and the hits, plus the model's summaries) and `STATE_COPIES` copies of its state,
    plus one for each group of a block (the starts its replays may need, `ReplayGroups`); all
    from `trajectory_shapes`. Trusted only far below the budget (`ROUGH_SHARE`); the memory
    analysis of a compiled probe (`bytes_per_trajectory`) decides elsewhere."""
    state, summary, one_record = trajectory_shapes(program, hp_names, task)
    state_size = _tree_bytes(state)
    outputs = state_size + _tree_bytes(summary) + len(program.record_steps) * _tree_bytes(one_record)
    draw = hook(program.model, "draw")
    drawn = 0 if draw is None else _tree_bytes(jax.eval_shape(lambda k: draw(k, task), jax.eval_shape(jax.random.key, 0)))
    return (_tree_bytes(task) + seeds * drawn,
            (1 + HOST_COPIES) * outputs + (STATE_COPIES + group_count(program)) * state_size)


def bytes_per_trajectory(program: Program, hp_names, task) -> int:
    """Memory one trajectory of a chunk needs, from XLA's memory analysis of the compiled chunk
    program at a probe batch (arguments + temporaries + outputs, all linear in the batch), plus
    the host copies of its outputs; `jax.eval_shape` of the outputs where no analysis exists."""
    probe = compile_chunk(program, PROBE_BATCH, hp_names, task, 0)
    dealt = isinstance(probe.executable, DealtExecutable)
    stats = [one.memory_analysis() for one in (probe.executable.executables if dealt else (probe.executable,))]
    if None in stats:
        shapes = jax.eval_shape(lambda *a: run_chunk(program, *a), *_abstract_args(program, 1, hp_names, task))
        return (1 + HOST_COPIES) * _tree_bytes(shapes)
    device = sum(one.argument_size_in_bytes + one.temp_size_in_bytes + one.output_size_in_bytes for one in stats)
    return -(-(device + HOST_COPIES * sum(one.output_size_in_bytes for one in stats)) // probe.batch)


def memory_budget(fraction_of_device: float = 0.5, fraction_of_host: float = 0.125) -> int:
    """Bytes a chunk may use: a fraction of the smallest local accelerator's memory and of the
    host's physical memory (on CPU, only the latter)."""
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    budget = int(fraction_of_host * host)
    for device in jax.local_devices():
        stats = device.memory_stats() if hasattr(device, "memory_stats") else None
        if stats and "bytes_limit" in stats:
            budget = min(budget, int(fraction_of_device * stats["bytes_limit"]) * len(jax.local_devices()))
    return budget


CPU_CHUNK_STATE_BYTES = 192 << 10
"""On CPU a chunk's states take at most this many bytes (`max_chunk`): a step's working set, the
states and the few copies its temporaries make (products, gradients), then stays in a core's L2
cache (1 MiB on the machines measured). Measured on one core, 3,072 trajectories x 400 steps,
hits at 3 levels (traj-steps/s): matrix sensing d = 10 (2,466 bytes a trajectory) 3.1e5 at
chunks of 64 and 128, 2.3e5 at 512; d = 5 (666 bytes) 1.8e6 at 256, 1.7e6 at 512; the toy
(82 bytes, 100,002 trajectories x 2,000 steps) the same at 2,368 and 8,384."""


def max_chunk(state_size: int = 0) -> int:
    """Largest useful chunk of trajectories whose state takes `state_size` bytes each
    (`lockstep_state_bytes`): on CPU at most 16k trajectories (PERFORMANCE.md) whose states fit in
    `CPU_CHUNK_STATE_BYTES`; an accelerator wants as many as fit."""
    if jax.default_backend() != "cpu":
        return 1 << 20
    return min(16_384, CPU_CHUNK_STATE_BYTES // max(1, state_size))


SEQUENTIAL_CHUNK_FLOPS = 1e13
"""A chunk of a program that runs its trajectories one by one holds at most this much work, its
runs' gradients to the step limit (`max_sequential_chunk`; at least one vector block of runs):
minutes of one CPU core, so a long sweep reports progress, keeps what it finished if killed and
splits over shards chunk by chunk. gissin-fig3 (2,500 runs of 3.5e10 flops each to the step limit)
ran as one chunk of about half an hour; it now runs in 10 of 256. Each run is computed alone, so
the chunking changes no result."""


def max_sequential_chunk(program: Program) -> int:
    """Largest chunk of a one-by-one program (`SEQUENTIAL_CHUNK_FLOPS`): no bound for a batched one."""
    if not program.sequential:
        return 1 << 30
    run = program.record_steps[-1] * max(program.step_flops, 1.0)
    return max(1, int(SEQUENTIAL_CHUNK_FLOPS // run))


def follows_leading_axis() -> bool:
    """Whether chunks follow the values of the grid's leading axis (`grid.aligned_group`), so that
    axis enters the chunk program as a constant (`specialized_axes`): on CPU, where a constant
    depth makes integer powers and layer masks a scalar test. On an accelerator a chunk's step is
    bound by launching kernels and testing loops, not by its arithmetic, and each value's branch
    costs compile time. Measured on one H200 (toy sweep, 500,004 trajectories x 10,000 steps):
    one chunk of all depths compiled in 1.83 s and ran in 2.08 s, six chunks of one depth each in
    4.64 + 1.90 s; gissin-fig6 end to end 14.6 s against 17.5 s; results bit for bit the same."""
    return jax.default_backend() == "cpu"


def _compile(lowered, options: dict, speed: dict):
    """`lowered` compiled with `options` and the compile-time-only `speed` options, or without
    the latter where this XLA does not know them."""
    try:
        return lowered.compile(compiler_options=options | speed)
    except jax.errors.JaxRuntimeError as error:
        if "No such compile option" not in str(error):
            raise
        return lowered.compile(compiler_options=options)


def _dealt_executable(fn, args, devices, options: dict, speed: dict, steps: int, unit: int = 1):
    """`fn` compiled for the abstract `args` of one device's share with `options` and the
    compile-time-only `speed`: on one device its executable; on several the same module lowered
    for each and compiled side by side (XLA compiles outside Python's lock), a `DealtExecutable`
    dealing `unit` positions at a time by their work in runs of at most `steps` steps."""
    if len(devices) == 1:
        return _compile(jax.jit(fn).lower(*args), options, speed)
    lowered = [jax.jit(fn, in_shardings=on, out_shardings=on).lower(*args)
               for on in map(jax.sharding.SingleDeviceSharding, devices)]
    with concurrent.futures.ThreadPoolExecutor(len(devices)) as pool:
        executables = pool.map(lambda one: _compile(one, options, speed), lowered)
        return DealtExecutable(tuple(executables), tuple(devices), steps, unit)


def compile_chunk(program: Program, batch: int, hp_names, task, seed: int, constant: dict[str, tuple] | None = None,
                  seeds: tuple[int, ...] | None = None, small: int | None = None,
                  switched: dict[str, tuple] | None = None) -> CompiledChunk:
    """Lower and compile the chunk program for chunks of `batch` trajectories (timed) at the batch
    of `compiled_batch`, with XLA's `COMPILER_OPTIONS`. `constant` maps the axes with one value per
    chunk to the values they take (`specialized_axes`); `switched` maps every axis to its values,
    of which a one-by-one program that `Program.switches` compiles in each run's own
    (`specialized_axes` of them, switched per run); `seeds` are the slots of the per-seed
    layout (`seed_slots`); `small` is the batch of a small sweep (`small_sweep_batch`), which runs
    in lockstep on the first device and replays one (row, group) pair at a time. A
    `Program.sequential` runs its trajectories one after another (`run_sequential`), whatever the
    layout, dealt over the devices of `deal_count` (`DealtExecutable`). A batched program that
    `Program.deals` is compiled at a share of the batch for every local device and dealt over
    them by whole vector rows or seed cycles (`DealtExecutable`); each share is a batch of the
    same layout, which computes every trajectory as any other chunking does. Otherwise, with
    several `lockstep_devices`, the batch axis is sharded over all of them (a 1-D `NamedSharding`
    mesh) and the task and key are replicated; every device computes the same layout, so the
    results equal a single-device run bit for bit."""
    use_compilation_cache()
    constant = dict(constant or {})
    sequential = program.sequential
    seeds = None if sequential else seeds
    period = len(seeds) if seeds else None
    if sequential:
        batch = compiled_batch(batch, small=small, devices=1)
        devices = jax.local_devices()[:deal_count(program, batch)]
        batch = -(-batch // len(devices)) * len(devices)          # whole rows per device
    else:
        devices = lockstep_devices()[:1] if small else lockstep_devices()
        dealt = jax.local_devices() if program.deals and not small and len(devices) == 1 else []
        batch = compiled_batch(batch, period, devices=len(dealt) or len(devices), small=small)
    start = time.perf_counter()
    if sequential:
        fn = functools.partial(run_sequential, program,
                               specialized=specialized_axes(constant | ((switched or {}) if program.switches else {})))
        speed = {} if selects_features(program, hp_names, task) else (
            SEQUENTIAL_SPEED_OPTIONS | (QUICK_COMPILE_OPTIONS if program.quick_compile else {}))
        executable = _dealt_executable(fn, _abstract_args(program, batch // len(devices), hp_names, task, constant),
                                       devices, SEQUENTIAL_COMPILER_OPTIONS, speed, program.record_steps[-1])
    else:
        share = batch // (len(dealt) or 1)                         # one device's rows (all of them unless dealt)
        if small:
            slots, capacity, slot_capacity = None, len(devices), 1
        else:
            slots = slot_count(share, period, devices=len(devices))
            capacity = replay_capacity(share, len(devices) * LANES)
            slot_capacity = replay_capacity(slots, len(devices) * LANES)
        fn = functools.partial(run_chunk, program, specialized=specialized_axes(constant), period=period,
                               capacity=capacity, slots=slots, slot_capacity=slot_capacity)
        if len(devices) > 1:
            mesh = _batch_mesh(devices)
            rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
            whole = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
            shardings = (whole, rows, rows, {name: whole if name in constant else rows for name in hp_names},
                         jax.tree.map(lambda _: whole, task))
            lowered = jax.jit(fn, in_shardings=shardings).lower(*_abstract_args(program, batch, hp_names, task, constant))
            executable = lowered.compile(compiler_options=COMPILER_OPTIONS)
        else:
            executable = _dealt_executable(fn, _abstract_args(program, share, hp_names, task, constant),
                                           dealt or devices, COMPILER_OPTIONS, {}, program.record_steps[-1], period or 1)
    return CompiledChunk(program, batch, executable, time.perf_counter() - start, jax.random.key(seed), constant, seeds,
                         small)
