"""Settings and result of a training run (`vlash.train.trainer.train`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from vlash.train.chunked_demos import ChunkedExecution
from vlash.train.errors import ConfigError, TrainError
from vlash.train.samples import PREFIX_SOURCES, SampleSpec

if TYPE_CHECKING:
    from vlash.sim.settings import SimSettings

DEFAULT_TASKS = ("reach", "track", "whack", "intercept")
# TrainConfig.action_norm (vlash.policies.processing.normalization.NormMode values)
ActionNorm = Literal["QUANTILES", "MEAN_STD", "MIN_MAX"]
ACTION_NORMS: tuple[str, ...] = get_args(ActionNorm)

# the training-only heads (vlash.train.vision_aux, trainer.Auxiliaries) and the TrainConfig field of each one's weight
AUX_WEIGHTS = {
    "vision": "vision_aux_weight",
    "patch_offset": "patch_offset_weight",
    "target": "target_aux_weight",
    "expert_target": "expert_target_aux_weight",
    "named_patch": "named_patch_weight",
}


@dataclass
class TrainConfig:
    """One training run: data, model, optimizer, augmentations, output."""

    policy: str = "pi05-tiny"  # policy preset name or YAML path (the architecture trained from scratch)
    tasks: tuple[str, ...] = DEFAULT_TASKS  # simulated tasks to record expert episodes of
    episodes_per_task: int = 200  # expert episodes recorded per task, >= 1
    steps: int = 1500  # optimizer steps, >= 1 (pi05-tiny, batch 32, 2 CPU cores: ~1.9 steps/s, ~13 min)
    batch_size: int = 32  # samples per step, >= 1
    lr: float = 1e-3  # AdamW peak learning rate, > 0 (from scratch, short budget: 1e-3 beat 3e-4 at 300 steps)
    warmup_steps: int = 100  # linear warm-up from 0 to lr, >= 0; then cosine decay
    min_lr_ratio: float = 0.1  # the cosine decays to lr * min_lr_ratio at the last step, in [0, 1]
    weight_decay: float = 0.01  # AdamW decoupled weight decay on weight matrices, >= 0
    grad_clip: float = 1.0  # max global gradient norm, > 0
    # exponential moving average of the weights, updated after every optimizer step; the policy directory gets
    # the average. In [0, 1); 0: off (the last weights are saved)
    ema_decay: float = 0.0
    seed: int = 0  # seeds recording, sample draws, noise, times and the initial weights
    d_max: int = 8  # largest future-state offset / committed prefix (control steps), 0 <= d_max < H
    augment: bool = True  # future-state offsets + committed prefix / horizon-aware mix (off: the baseline)
    mix_prob: float = 0.5  # share of hand-off samples (committed prefix, horizon-aware times), in [0, 1]
    has_prob: float = 0.5  # share of horizon-aware per-token times among hand-off samples, in [0, 1]
    moving_share: float = 0.0  # share of draws from frames whose chunk label moves, in [0, 1]
    pad_loss_weight: float = 0.1  # weight of the zero-padded action dims in the loss (see flow.flow_loss)
    image_size: int = 96  # simulator render size in pixels (resized to the policy's input size)
    # simulator settings the episodes are recorded (and the auxiliary labels replayed) with, keyed as in a
    # configs/eval/*.yaml file (vlash.sim.load_sim_settings; every key optional; {}: the defaults); its image size
    # is image_size. Action interfaces: position (joint targets) or velocity (joint velocities; ee_delta is refused)
    sim: dict[str, Any] = field(default_factory=dict)
    # how the actions are normalized: "QUANTILES" (q01 / q99 -> -1 / 1, pi0.5's), "MEAN_STD" or "MIN_MAX"; None:
    # MEAN_STD for velocity actions, QUANTILES otherwise. Velocity labels are mostly zero (holding): scaled to [-1, 1]
    # by their range or quantiles their variance is ~0.06, so the flow loss of a model that ignores the observation
    # is already ~0.06 and the labels barely steer training; MEAN_STD gives them unit variance
    action_norm: ActionNorm | None = None
    only_successful: bool = True  # train on the episodes the expert solved only
    num_threads: int = 2  # torch CPU threads, >= 1
    # torch.compile the training forward (vlash.policies.pi05.model): ~1.6x faster steps on CPU after a one-off
    # compile of ~1-2 min (cached by inductor across runs); needs a C++ compiler. Numbers differ from eager at
    # float rounding, so a run is deterministic given the seed, thread count and this flag
    compile: bool = False
    out: str = "checkpoints/sim"  # policy directory to write (replaced atomically)
    # .npz of recorded episodes: loaded when it exists, else recorded and saved
    dataset: str | None = field(default=None, metadata={"metavar": "FILE.npz"})
    log_every: int = 25  # steps per progress-bar update and per loss-log line, >= 1
    checkpoint_every: int = 0  # write the policy directory every this many steps too; 0: only at the end
    # end the run after this many steps of the `steps` schedule (learning rate, EMA) and write the policy there;
    # None: run all `steps`. A shipped recipe that keeps an early checkpoint of a longer schedule is one command
    stop_after: int | None = None
    # weight of the per-patch item-label loss on the vision tower (train.vision_aux); 0: flow loss only. Every
    # shipped policy was trained with 1 (docs/EVALUATION.md has the recipes)
    vision_aux_weight: float = 0.0
    # weight of the per-patch regression of where in its patch each item's centre is (train.vision_aux); 0: off
    patch_offset_weight: float = 0.0
    # weight of the task-target regression from the VLM's last prompt token (train.vision_aux); 0: off
    target_aux_weight: float = 0.0
    # weight of the same target regression from the expert's residual at every action token; 0: off
    expert_target_aux_weight: float = 0.0
    # weight of the classification of which image token holds the task's target, from the VLM stream the target
    # head reads (image tokens see the instruction); 0: off
    named_patch_weight: float = 0.0
    target_aux_layer: int | None = None  # VLM layer whose input the target head reads; None: the last layer
    expert_target_aux_layer: int | None = None  # expert layer whose input its head reads; None: the final norm's
    # the first this many of `steps` train the auxiliary heads only (vision tower + VLM on a prefix-only pass,
    # no expert, no flow loss), so the expert starts on a VLM that already locates the named target; needs an
    # auxiliary weight > 0. 0: every step is a flow step; equal to `steps`: a grounding-only run, whose
    # directory is a VLM base for `init_from` (its expert is untrained)
    grounding_steps: int = 0
    # policy directory (same preset) to start from: all its weights and its tokenizer (train.base); None: a
    # fresh initialisation (train.init)
    init_from: str | None = field(default=None, metadata={"metavar": "DIR"})
    vision_probe_every: int = 100  # measure image_gain (train.vision_use) every this many steps and at the end; 0: off
    progress: bool = True  # draw progress bars
    trim_prompt: bool = True  # pad prompts only to the longest one while training (same result, faster)
    # predict the chunk relative to the given state (openpi's DeltaActions). None: on for position actions, off for
    # velocity actions (joint velocities are not relative to the state; True is refused there)
    relative_actions: bool | None = None
    # plan end-effector positions instead of joint angles, or with velocity actions end-effector velocities
    # (vlash.policies.processing.task_space): states and actions are mapped by the arm's kinematics; the robot
    # still sends joints and receives joint chunks
    task_space: bool = False
    # label chunks past an episode's end with the expert's plan from its final state (H steps) instead of masking
    # them; False also drops the tails of a loaded dataset (docs/EVALUATION.md has the A/B)
    label_tail: bool = True
    # label each frame's chunk with the plan the expert made at that frame (recorded, H + d_max steps) instead of
    # the actions it went on to command, which on whack move toward targets that appear later
    plan_labels: bool = False
    # where the committed prefix of a hand-off sample comes from (vlash.train.samples): "plan" (the plan's own first
    # rows) or "executed" (what the demonstration executed then; with plan_labels, the rows of an earlier plan)
    prefix_from: str = field(default="plan", metadata={"choices": PREFIX_SOURCES})
    # record the expert the way a chunk policy runs (vlash.train.chunked_demos): it plans at every this many steps
    # and runs each plan open loop until the next takes over; 1 with demo_delay_max 0: it replans every step. The
    # frames then show the states the policy's own chunked execution reaches; needs plan_labels
    demo_execute_steps: int = 1
    # each recorded episode's new chunks take over d ~ U{0..this} steps after the frame they were planned at (the
    # previous chunk running meanwhile, as under an inference delay), 0 <= this < demo_execute_steps
    demo_delay_max: int = 0
    # embeddings at unit residual scale, 2-D sin/cos image positions (train.init), for a run from scratch. Off
    # unless told, yet every shipped policy trained from scratch had it on (docs/EVALUATION.md has the recipes)
    scratch_init: bool = False
    bin_embedding_init: bool = True  # start state-bin token embeddings from a code of their value (train.init)
    extra: dict[str, Any] = field(default_factory=dict)  # free-form provenance copied into the metadata

    def __post_init__(self) -> None:
        self.tasks = tuple(self.tasks)
        if not self.tasks or any(not isinstance(t, str) or not t for t in self.tasks):
            raise ConfigError(f"tasks must be a non-empty list of task names, got {self.tasks!r}")
        ints = {
            "episodes_per_task": (self.episodes_per_task, 1),
            "steps": (self.steps, 1),
            "batch_size": (self.batch_size, 1),
            "warmup_steps": (self.warmup_steps, 0),
            "image_size": (self.image_size, 8),
            "num_threads": (self.num_threads, 1),
            "log_every": (self.log_every, 1),
            "checkpoint_every": (self.checkpoint_every, 0),
            "vision_probe_every": (self.vision_probe_every, 0),
            "grounding_steps": (self.grounding_steps, 0),
        }
        for name, (value, low) in ints.items():
            if not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
        positive = {"lr": self.lr, "grad_clip": self.grad_clip}
        for name, value in positive.items():
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ConfigError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if not (0.0 <= self.ema_decay < 1.0):
            raise ConfigError(f"ema_decay must be in [0, 1), got {self.ema_decay!r}")
        if not (0.0 <= self.min_lr_ratio <= 1.0):
            raise ConfigError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}")
        for name in AUX_WEIGHTS.values():
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be >= 0, got {value!r}")
        if self.stop_after is not None and not (
            isinstance(self.stop_after, int) and 1 <= self.stop_after <= self.steps
        ):
            raise ConfigError(f"stop_after must be in [1, steps ({self.steps})] or None, got {self.stop_after!r}")
        if self.grounding_steps > self.steps:
            raise ConfigError(f"grounding_steps must be <= steps ({self.steps}), got {self.grounding_steps}")
        prefix_heads = [field for head, field in AUX_WEIGHTS.items() if head != "expert_target"]
        if self.grounding_steps and not any(getattr(self, field) > 0 for field in prefix_heads):
            raise ConfigError(f"grounding_steps trains the auxiliary heads only; set one of {', '.join(prefix_heads)}")
        if not (math.isfinite(self.pad_loss_weight) and self.pad_loss_weight >= 0):
            raise ConfigError(f"pad_loss_weight must be >= 0, got {self.pad_loss_weight!r}")
        if self.init_from is not None and self.scratch_init:
            raise ConfigError("init_from and scratch_init both set the initial weights; choose one")
        if not str(self.out):
            raise ConfigError("out must name a directory")
        self._check_action_interface(self.sim_settings().action_interface)
        if not self.demo_execution().per_step and not self.plan_labels:
            raise ConfigError("demo_execute_steps / demo_delay_max command stale actions: they need plan_labels")
        self.sample_spec(self.d_max + 1)  # validates d_max >= 0, mix_prob, has_prob and moving_share

    def _check_action_interface(self, interface: str) -> None:
        """Resolve relative_actions for the interface and refuse what does not apply to its actions."""
        if interface == "ee_delta":
            raise ConfigError(
                "sim action_interface ee_delta (end-effector increments) is not supported by training yet; "
                "use position or velocity"
            )
        if interface == "velocity" and self.relative_actions:
            raise ConfigError(
                "velocity actions are joint velocities, not offsets from the state: relative_actions must be off"
            )
        if self.relative_actions is None:
            self.relative_actions = interface == "position"
        if self.action_norm is None:
            self.action_norm = "MEAN_STD" if interface == "velocity" else "QUANTILES"
        if self.action_norm not in ACTION_NORMS:
            raise ConfigError(f"action_norm must be one of {', '.join(ACTION_NORMS)}, got {self.action_norm!r}")

    def sim_settings(self) -> SimSettings:
        """The simulator settings of `sim`, at image_size."""
        from vlash.sim.errors import SimConfigError  # extra: sim
        from vlash.sim.settings import SimSettings  # extra: sim

        if not isinstance(self.sim, Mapping):
            raise ConfigError(f"sim must map simulator settings to values, got {self.sim!r:.80}")
        try:
            settings = SimSettings.from_dict(self.sim)
            if "image_size" in self.sim and settings.image_size != self.image_size:
                raise ConfigError(f"sim image_size {settings.image_size} != image_size {self.image_size}; set one")
            return replace(settings, image_size=self.image_size)
        except SimConfigError as exc:
            raise ConfigError(f"sim: {exc}") from None

    def demo_execution(self) -> ChunkedExecution:
        """How the expert's demonstrations are executed (demo_execute_steps, demo_delay_max)."""
        try:
            return ChunkedExecution(self.demo_execute_steps, self.demo_delay_max)
        except TrainError as exc:
            raise ConfigError(f"demo_{exc}") from None

    @property
    def velocity_dt(self) -> float | None:
        """The control period [s] velocity actions run for (SampleSpec.velocity_dt); None for position actions."""
        settings = self.sim_settings()
        return settings.arm.control_dt if settings.action_interface == "velocity" else None

    @property
    def aux_weights(self) -> dict[str, float]:
        """The weight of each training-only head by its name (AUX_WEIGHTS)."""
        return {head: getattr(self, field) for head, field in AUX_WEIGHTS.items()}

    @property
    def uses_auxiliaries(self) -> bool:
        """Whether any training-only head is on (they need labels replayed from the simulator)."""
        return any(w > 0 for w in self.aux_weights.values())

    def sample_spec(self, horizon: int) -> SampleSpec:
        """How samples are drawn for a policy with chunk length `horizon`."""
        if not self.augment:
            return replace(SampleSpec.baseline(horizon, self.velocity_dt), moving_share=self.moving_share)
        return SampleSpec(
            horizon=horizon,
            d_max=self.d_max,
            mix_prob=self.mix_prob,
            has_prob=self.has_prob,
            moving_share=self.moving_share,
            velocity_dt=self.velocity_dt,
            prefix_source=self.prefix_from,
        )

    @property
    def final_step(self) -> int:
        """The step the run ends on: stop_after, else steps."""
        return self.steps if self.stop_after is None else self.stop_after

    def to_dict(self) -> dict[str, Any]:
        """Plain types only (YAML-safe)."""
        out = asdict(self)
        out["tasks"] = list(self.tasks)
        out["sim"] = json.loads(json.dumps(self.sim))  # tuples -> lists
        return out


@dataclass
class TrainResult:
    """What a finished run reports."""

    out: Path  # the policy directory written
    final_loss: float  # mean optimized loss over the last log_every steps
    final_real_loss: float  # same, real action dims only
    loss_curve: list[float]  # optimized loss of every step
    real_loss_curve: list[float]  # loss on the real action dims of every step
    wall_time_s: float  # whole run: data, training, saving
    train_time_s: float  # the optimizer steps only
    steps_per_s: float  # steps / train_time_s
    num_episodes: int  # episodes trained on
    num_frames: int  # frames trained on
    success_rate: float  # the expert's success rate over the recorded (unfiltered) episodes
    metadata: dict[str, Any] = field(default_factory=dict)  # what was written to config.yaml

    def summary(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "final_loss": self.final_loss,
            "final_real_loss": self.final_real_loss,
            "first_loss": self.loss_curve[0] if self.loss_curve else None,
            "steps": len(self.loss_curve),
            "wall_time_s": round(self.wall_time_s, 1),
            "train_time_s": round(self.train_time_s, 1),
            "steps_per_s": round(self.steps_per_s, 3),
            "episodes": self.num_episodes,
            "frames": self.num_frames,
            "expert_success_rate": self.success_rate,
            "image_gain": self.metadata.get("image_gain"),  # None when the vision probe was off
        }
