"""The papers' theory, one module per paper: `gissin` (the toy model's closed forms, thresholds and
Theorems 1-3), `gidel` (deep linear regression, rank-k solutions, Theorems 1-3, Cor. 1-3),
`hacohen` (per-principal-component rates, eq. 10) and `azulay` (the shape of the init, Q_c and Q);
every function is also reachable here (`theory.log_gf_threshold`)."""

from __future__ import annotations

from dlsweep.analysis.theory.gissin import (SQRT2_BOUND, LOG_SIGMA0_FLOOR, LOG_FLOAT64_MAX,
                                            log_time_to_reach_unit, time_to_reach, sigma_gf,
                                            time_gf_infinite_depth, time_to_reach_closed_form,
                                            log_gf_threshold, log_thm2_bounds, thm2_bounds_printed,
                                            thm2_upper_valid, Theorem3Bounds, thm3_bounds)  # noqa: F401
from dlsweep.analysis.theory.gidel import (linear_loss, pc_basis, reduced_rank_solution,
                                           gidel_rank_k_solution, rank_k_distances, closest_approach,
                                           linear_model_gf, linear_model_gd, gidel_w_gf, gidel_phase_times,
                                           gidel_phase_steps, gidel_step_limit, gidel_norm_sq,
                                           gidel_norm_sq_limit, gidel_gd_product, gidel_turn_on_step,
                                           gidel_thm3_bounds, gidel_cor3_limits, gidel_cor3_max_lr)  # noqa: F401
from dlsweep.analysis.theory.hacohen import (hacohen_contraction, predicted_pc_rates, predicted_pc_trajectory,
                                             pc_distances, fit_pc_rates)  # noqa: F401
from dlsweep.analysis.theory.azulay import (azulay_shape, azulay_layers, azulay_c, azulay_q, azulay_Q,
                                            MAX_DUAL_MOVE, azulay_q_minimizer, min_l2_interpolator,
                                            min_l1_interpolator, neuron_delta, neuron_q, neuron_q_prime,
                                            neuron_Q, neuron_q_minimizer)  # noqa: F401
