"""The per-run jitted JAX loop that a careful researcher writes by hand for any dlsweep sweep,
built from the model contract alone (`init`, `loss`, `observe`, and `draw` through the engine's
`draw_task`): `jax.jit` of ONE whole trajectory, called in a Python loop over the runs.

One trajectory is a `lax.while_loop` over blocks of `check_every` steps; each step is plain GD
p <- p - lr * jax.grad(model.loss) (for a sweep with another `[optimizer]`, that optimizer's optax
transformation, as a researcher would take it from optax), then the first-hitting steps of sigma_i >= level * sigma*_i
(the model observed after every step, where the sweep has levels), then, at the sweep's recorded
steps, the loss and everything the model observes into a preallocated buffer. After each block the
stop rule of `engine.settle`: non-finite or loss > blowup * loss0 -> diverged, restored to the
block's start; every level hit and (loss <= rel_loss * loss0 or loss <= stop.loss) -> converged.
Records after the step where a run stopped hold its final state, as dlsweep's frozen trajectories.

It is faithful to dlsweep's run of the same sweep: same model functions, same data (each seed's
task drawn once by `engine.draw_task`), same init key (`fold_in(key(sweep.seed), run_id)`, as
`engine.run_chunk`), same hyperparameters in the same dtypes (`engine.cast_hps`), same stop rule.
Hyperparameters are traced, so the loop compiles once per sweep (per static shape). It differs
from dlsweep in what dlsweep adds for speed (batching, depth compiled in, the hit-peak test) and
in where the stop rule is checked (every `check_every` steps from step 0 here; dlsweep's lockstep
blocks also end at recorded steps), so a run may stop up to one check interval apart.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from dlsweep import api, engine
from dlsweep.spec import Sweep

STEP = jnp.int32


def trajectory(program: engine.Program, steps: int):
    """(root key, run id, hp, task) -> one whole trajectory of `steps` steps at most, stopped by
    the sweep's rule: {steps_run, executed (steps computed, the diverged block included),
    diverged, converged, final_loss, hit (k, levels), loss (R,), observed {name: (R, ...)}}."""
    model, k_check = program.model, program.check_every
    record_steps = jnp.asarray(program.record_steps, STEP)
    n_records = len(program.record_steps)

    def update_hits(hit, params, hp, task, step):
        if not program.levels:
            return hit
        sigma = model.observe(params, hp, task)["sigma"]
        thresholds = jnp.asarray(program.levels, sigma.dtype)[None, :] * task["sigma_star"][:, None].astype(sigma.dtype)
        return jnp.where((hit < 0) & (sigma[:, None] >= thresholds), step, hit)

    def measured(params, hp, task):
        return model.loss(params, hp, task), model.observe(params, hp, task)

    plain = program.optimizer.name == "sgd"

    def run(root_key, run_id, hp, task):
        params = model.init(jax.random.fold_in(root_key, run_id), hp, task)
        optimizer = None if plain else program.optimizer.transformation(hp, program.dtype)
        opt_state = None if plain else optimizer.init(params)
        loss0, observed0 = measured(params, hp, task)
        hit = jnp.full((observed0["sigma"].shape[0], len(program.levels)), -1, STEP)
        hit = update_hits(hit, params, hp, task, STEP(0))
        records = jax.tree.map(lambda v: jnp.zeros((n_records, *v.shape), v.dtype).at[0].set(v), (loss0, observed0))

        def step(i, carry):
            (params, opt_state), hit, records, r = carry
            grads = jax.grad(model.loss)(params, hp, task)
            if plain:
                params = jax.tree.map(lambda p, g: p - hp["lr"] * g, params, grads)
            else:
                updates, opt_state = optimizer.update(grads, opt_state, params)
                params = jax.tree.map(lambda p, u: p + u, params, updates)
            t = i + 1
            hit = update_hits(hit, params, hp, task, t)
            due = (r < n_records) & (record_steps[jnp.minimum(r, n_records - 1)] == t)
            write = lambda rec: jax.tree.map(lambda buf, v: buf.at[r].set(v), rec, measured(params, hp, task))  # noqa: E731
            records = jax.lax.cond(due, write, lambda rec: rec, records)
            return (params, opt_state), hit, records, r + due

        def block(carry):
            start, _, state, hit, records, r, _, _ = carry        # state: (params, optimizer state)
            end = jnp.minimum(start + k_check, steps)
            new_state, new_hit, records, r = jax.lax.fori_loop(start, end, step, (state, hit, records, r))
            loss = model.loss(new_state[0], hp, task)
            finite = jnp.isfinite(loss) & jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(new_state[0])]))
            diverged = ~finite | (loss > program.blowup * loss0)
            small = (loss <= program.rel_loss * loss0) | (loss <= program.loss_below)
            converged = ~diverged & jnp.all(new_hit >= 0) & small
            state, hit = jax.tree.map(lambda old, new: jnp.where(diverged, old, new), (state, hit), (new_state, new_hit))
            return jnp.where(diverged, start, end), end, state, hit, records, r, diverged, converged

        def running(carry):
            start, _, _, _, _, _, diverged, converged = carry
            return (start < steps) & ~diverged & ~converged

        false = jnp.zeros((), bool)
        carry = (STEP(0), STEP(0), (params, opt_state), hit, records, STEP(1), false, false)
        steps_run, executed, (params, _), hit, records, _, diverged, converged = jax.lax.while_loop(running, block, carry)
        final = measured(params, hp, task)
        after = record_steps > steps_run
        records = jax.tree.map(lambda buf, v: jnp.where(after.reshape(-1, *([1] * v.ndim)), v, buf), records, final)
        return {"steps_run": steps_run, "executed": executed, "diverged": diverged, "converged": converged,
                "final_loss": final[0], "hit": hit, "loss": records[0], "observed": records[1]}

    return run


@dataclasses.dataclass
class PerRun:
    """The per-run loop of one sweep: its compiled trajectory, the hyperparameters of every run
    (`engine.cast_hps` of the flat grid) and each seed's task (drawn once, not timed)."""

    sweep: Sweep
    program: engine.Program
    hps: dict[str, np.ndarray]
    tasks: dict[int, dict]
    root_key: jax.Array
    compiled: object
    compile_seconds: float

    @classmethod
    def prepare(cls, sweep: Sweep) -> "PerRun":
        """Draw every seed's task and compile the trajectory once (timed: `compile_seconds`)."""
        program, flat, task = api.compile_inputs(sweep)
        hps = engine.cast_hps(flat.columns, sweep.dtype)
        seeds = [int(s) for s in np.unique(hps["seed"])] if "seed" in hps else [0]
        tasks = {s: {k: jnp.asarray(v) for k, v in engine.draw_task(program, task, s, sweep.seed).items()} for s in seeds}
        root_key = jax.random.key(sweep.seed)
        start = time.perf_counter()
        compiled = jax.jit(trajectory(program, sweep.steps)).lower(
            root_key, np.int32(0), cls._hp(hps, 0), tasks[seeds[0]]).compile()
        return cls(sweep, program, hps, tasks, root_key, compiled, time.perf_counter() - start)

    @staticmethod
    def _hp(hps: dict[str, np.ndarray], run_id: int) -> dict[str, np.ndarray]:
        return {name: values[run_id] for name, values in hps.items()}

    def run(self, run_ids) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Each run of `run_ids` to its stop, one call after another: the summaries (steps_run,
        executed, diverged, converged, final_loss, and the loss at the recorded steps; one entry
        per run) as NumPy arrays, and each call's wall time (dispatch, compute and the copy of its
        results to the host)."""
        out: dict[str, list] = {name: [] for name in ("steps_run", "executed", "diverged", "converged", "final_loss", "loss")}
        seconds = []
        for run_id in run_ids:
            start = time.perf_counter()
            hp = self._hp(self.hps, int(run_id))
            task = self.tasks[int(hp["seed"]) if "seed" in hp else 0]
            result = jax.device_get(self.compiled(self.root_key, np.int32(run_id), hp, task))
            seconds.append(time.perf_counter() - start)
            for name in out:
                out[name].append(result[name])
        return {name: np.asarray(values) for name, values in out.items()}, np.asarray(seconds)
