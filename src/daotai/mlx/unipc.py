"""UniPC multistep sampler for flow-matching Wan, matching diffusers' UniPCMultistepScheduler.

Wan2.1's published diffusers folders ship ``UniPCMultistepScheduler`` with
``prediction_type="flow_prediction"``, ``use_flow_sigmas=True``, ``solver_order=2``,
``solver_type="bh2"`` and ``flow_shift`` 3 (480p) or 5 (720p). In that setting:

- sigmas are ``linspace(1, 1/N, n + 1)[:-1]`` shifted by ``shift*s / (1 + (shift-1)*s)``,
  the first nudged below 1 (so log(1 - sigma) stays finite), then a final 0; the model sees
  ``int(sigma * N)`` (diffusers stores the timesteps as int64);
- the model's velocity v becomes a data prediction ``x0 = x - sigma * v``; the sampler
  works in ``lambda = log((1 - sigma) / sigma)``;
- every step first corrects the previous step's result with the new prediction (UniC),
  then predicts the next sample (UniP) from the last ``order`` predictions.

Every scalar of that algorithm depends only on the schedule, so they are computed once,
here, in float64 numpy (:func:`unipc_plan`); the per-step work on latents is a handful of
MLX multiply-adds (:meth:`UniPCSampler.step`). Only the settings Wan uses are accepted;
anything else is refused by :meth:`UniPCConfig.from_dict` with the key and the rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from daotai.errors import BackendError
from daotai.mlx.schedule import FlowSchedule

SIGMA_ONE_NUDGE = 1e-6  # diffusers subtracts this from a first sigma of exactly 1


@dataclass(frozen=True)
class UniPCConfig:
    """The UniPCMultistepScheduler options that matter for flow-prediction Wan."""

    solver_order: int = 2
    solver_type: str = "bh2"  # "bh1" | "bh2"
    lower_order_final: bool = True
    disable_corrector: tuple[int, ...] = ()
    flow_shift: float = 3.0
    num_train_timesteps: int = 1000
    final_sigmas_type: str = "zero"  # "zero" | "sigma_min"

    @classmethod
    def from_dict(cls, cfg: dict[str, Any], where: str = "scheduler_config.json") -> "UniPCConfig":
        """Build from a diffusers scheduler config, refusing settings this sampler does not implement."""
        required = {"prediction_type": "flow_prediction", "use_flow_sigmas": True, "predict_x0": True}
        defaults = {"prediction_type": "epsilon", "use_flow_sigmas": False, "predict_x0": True}
        for key, want in required.items():
            got = cfg.get(key, defaults[key])
            if got != want:
                raise BackendError(f"{where}: {key}={got!r} must be {want!r} for wan-mlx's UniPC sampler")
        for key in ("thresholding", "use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas",
                    "use_dynamic_shifting", "shift_terminal", "solver_p", "rescale_betas_zero_snr"):
            if cfg.get(key):
                raise BackendError(f"{where}: {key}={cfg[key]!r} is not supported by wan-mlx's UniPC sampler "
                                   "(rule: off/null, as Wan ships it)")
        solver_type = cfg.get("solver_type", "bh2")
        if solver_type in ("midpoint", "heun", "logrho"):  # diffusers maps these to bh2 too
            solver_type = "bh2"
        if solver_type not in ("bh1", "bh2"):
            raise BackendError(f"{where}: solver_type={solver_type!r} must be 'bh1' or 'bh2'")
        order = int(cfg.get("solver_order", 2))
        if not 1 <= order <= 3:
            raise BackendError(f"{where}: solver_order={order} must be 1, 2 or 3")
        final = cfg.get("final_sigmas_type", "zero")
        if final not in ("zero", "sigma_min"):
            raise BackendError(f"{where}: final_sigmas_type={final!r} must be 'zero' or 'sigma_min'")
        lower_final = bool(cfg.get("lower_order_final", True))
        if not lower_final and order > 1 and final == "zero":
            # a multistep update into sigma 0 divides by lambda = inf: diffusers returns inf there too
            raise BackendError(f"{where}: lower_order_final=False with solver_order={order} and final sigma 0 "
                               "diverges; rule: lower_order_final must be true (as Wan ships it)")
        shift = float(cfg.get("flow_shift", 1.0))
        if not shift > 0:
            raise BackendError(f"{where}: flow_shift={shift!r} must be > 0")
        return cls(
            solver_order=order, solver_type=solver_type, lower_order_final=lower_final,
            disable_corrector=tuple(int(i) for i in cfg.get("disable_corrector") or ()), flow_shift=shift,
            num_train_timesteps=int(cfg.get("num_train_timesteps", 1000)), final_sigmas_type=final,
        )

    def describe(self) -> str:
        """Short text for notices and manifests."""
        return f"UniPC (order {self.solver_order}, {self.solver_type}, flow prediction)"


def unipc_schedule(steps: int, cfg: UniPCConfig, shift: float | None = None) -> FlowSchedule:
    """Timesteps (n,) float32 holding diffusers' int64 values, sigmas (n + 1,) float32."""
    if steps < 1:
        raise BackendError(f"steps: {steps} must be >= 1")
    shift = cfg.flow_shift if shift is None else shift
    if not shift > 0:
        raise BackendError(f"shift: {shift!r} must be > 0")
    n_train = cfg.num_train_timesteps
    s = np.linspace(1.0, 1.0 / n_train, steps + 1)[:-1]  # float64, as diffusers computes it
    s = shift * s / (1.0 + (shift - 1.0) * s)
    if abs(s[0] - 1.0) < SIGMA_ONE_NUDGE:
        s[0] -= SIGMA_ONE_NUDGE
    timesteps = (s * n_train).astype(np.int64).astype(np.float32)  # truncation, like torch's int64 cast
    last = s[-1] if cfg.final_sigmas_type == "sigma_min" else 0.0
    return FlowSchedule(timesteps=timesteps, sigmas=np.concatenate([s, [last]]).astype(np.float32))


@dataclass(frozen=True)
class Update:
    """x_new = scale*x - m0_coef*m0 - sum_k history[k]*(m_k - m0) - current*(m_new - m0).

    m0 is the newest data prediction the update starts from, m_k the k-th older one
    (k = 1, 2, ...), m_new the prediction at the target (corrector only).
    """

    scale: float
    m0_coef: float
    history: tuple[float, ...] = ()
    current: float = 0.0


@dataclass(frozen=True)
class UniPCStep:
    """Step i: sigma_i (for x0 = x - sigma_i v), the corrector of step i - 1's result, the predictor."""

    sigma: float
    corrector: Update | None
    predictor: Update


def _lambda(sigma: float) -> float:
    """log((1 - sigma) / sigma) with alpha = 1 - sigma (flow sigmas); +inf at sigma 0."""
    with np.errstate(divide="ignore"):
        return float(np.log(np.float64(1.0 - sigma)) - np.log(np.float64(sigma)))


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def _update(sig: np.ndarray, target: int, base: int, older: Sequence[int], order: int, solver_type: str,
            corrector: bool) -> Update:
    """The B(h) update from sigma index ``base`` to ``target`` using predictions at ``older`` indexes.

    The same algebra as diffusers' multistep_uni_p_bh_update / multistep_uni_c_bh_update with
    predict_x0, written once for both: rks are the older points' lambda offsets in units of h,
    R the Vandermonde matrix of rks, b the phi-function coefficients, rhos solve R rho = b.
    """
    sigma_t, sigma_s0 = np.float64(sig[target]), np.float64(sig[base])
    alpha_t = 1.0 - sigma_t
    lam_t, lam_s0 = _lambda(sigma_t), _lambda(sigma_s0)
    # numpy scalars, not floats: at the final sigma 0, h is +inf and the algebra must give
    # the same limits (and, for settings diffusers cannot run either, the same inf/nan) instead of raising
    h = np.float64(lam_t - lam_s0)
    rks = [(_lambda(float(sig[i])) - lam_s0) / h for i in older[: order - 1]] + [np.float64(1.0)]
    hh = -h
    h_phi_1 = np.expm1(hh)
    h_phi_k = h_phi_1 / hh - 1.0
    b_h = hh if solver_type == "bh1" else np.expm1(hh)
    r_rows, b = [], []
    factorial = 1
    for i in range(1, order + 1):
        r_rows.append([rk ** (i - 1) for rk in rks])
        b.append(h_phi_k * factorial / b_h)
        factorial *= i + 1
        h_phi_k = h_phi_k / hh - 1.0 / factorial
    r, bv = np.array(r_rows, dtype=np.float64), np.array(b, dtype=np.float64)
    if corrector:
        rhos = [0.5] if order == 1 else list(np.linalg.solve(r, bv))
        history = tuple(alpha_t * b_h * rho / rk for rho, rk in zip(rhos[:-1], rks[:-1], strict=False))
        current = alpha_t * b_h * rhos[-1]
    else:
        rhos = [] if order == 1 else [0.5] if order == 2 else list(np.linalg.solve(r[:-1, :-1], bv[:-1]))
        history = tuple(alpha_t * b_h * rho / rk for rho, rk in zip(rhos, rks[:-1], strict=False))
        current = 0.0
    return Update(scale=float(sigma_t / sigma_s0), m0_coef=float(alpha_t * h_phi_1),
                  history=tuple(float(c) for c in history), current=float(current))


def unipc_orders(steps: int, cfg: UniPCConfig) -> list[int]:
    """Predictor order of each step: warm-up from 1, and lower again at the end when configured."""
    out = []
    for i in range(steps):
        order = min(cfg.solver_order, steps - i) if cfg.lower_order_final else cfg.solver_order
        out.append(min(order, i + 1))
    return out


def unipc_plan(schedule: FlowSchedule, cfg: UniPCConfig) -> tuple[UniPCStep, ...]:
    """Every step's scalars, from the schedule alone."""
    sig = schedule.sigmas.astype(np.float64)  # the float32 values diffusers works with, widened
    n = len(schedule.timesteps)
    orders = unipc_orders(n, cfg)
    plan = []
    for i in range(n):
        corr = None
        if i > 0 and (i - 1) not in cfg.disable_corrector:
            # corrects step i-1 (from sigma_{i-1} to sigma_i) with the prediction made at step i
            corr = _update(sig, i, i - 1, [i - 2 - k for k in range(orders[i - 1] - 1)], orders[i - 1],
                           cfg.solver_type, corrector=True)
        pred = _update(sig, i + 1, i, [i - 1 - k for k in range(orders[i] - 1)], orders[i], cfg.solver_type,
                       corrector=False)
        plan.append(UniPCStep(sigma=float(sig[i]), corrector=corr, predictor=pred))
    return tuple(plan)


def apply_update(u: Update, x, m0, older: Sequence, m_new=None):
    """Evaluate an Update on arrays (mx or numpy): older = (m_1, m_2, ...), newest first."""
    out = u.scale * x - u.m0_coef * m0
    for coef, m in zip(u.history, older, strict=False):  # older may hold more than this order uses
        out = out - coef * (m - m0)
    if m_new is not None and u.current:
        out = out - u.current * (m_new - m0)
    return out


@dataclass(frozen=True)
class UniPCState:
    """What a multistep sampler carries between steps: recent x0 predictions (oldest first)
    and the sample the last predictor started from (the corrector redoes that step)."""

    predictions: tuple = ()
    last_sample: Any = None

    def arrays(self) -> list:
        """Every array held, so a lazy framework can evaluate them with the step's output."""
        return [a for a in (*self.predictions, self.last_sample) if a is not None]


@dataclass(frozen=True)
class UniPCSampler:
    """A UniPC run of fixed length; step() is pure: (sample, state) in, (next sample, state) out."""

    schedule: FlowSchedule
    plan: tuple[UniPCStep, ...]
    order: int
    config: UniPCConfig

    @classmethod
    def build(cls, steps: int, cfg: UniPCConfig, shift: float | None = None) -> "UniPCSampler":
        sched = unipc_schedule(steps, cfg, shift)
        return cls(sched, unipc_plan(sched, cfg), cfg.solver_order, cfg)

    def step(self, i: int, sample, velocity, state: UniPCState | None = None):
        """Latents (B, C, T, H, W) and the model's velocity at step i -> (latents at step i + 1, state)."""
        state = state or UniPCState()
        s = self.plan[i]
        m = sample - s.sigma * velocity  # data (x0) prediction, same shape as sample
        if s.corrector is not None:
            prev = state.predictions
            sample = apply_update(s.corrector, state.last_sample, prev[-1], prev[-2::-1], m_new=m)
        preds = (state.predictions + (m,))[-self.order:]
        nxt = apply_update(s.predictor, sample, m, preds[-2::-1])
        return nxt, UniPCState(preds, sample)
