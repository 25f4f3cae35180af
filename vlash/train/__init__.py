"""Training pi0.5-shaped policies on simulated expert data (flow matching, VLASH future-state offsets,
training-time RTC prefix and FASTER's horizon-aware mix). Entry point: `train(TrainConfig(...))` or
`vlash train`."""

from vlash.lazy_exports import lazy_exports
from vlash.train.config import TrainConfig, TrainResult
from vlash.train.errors import DatasetError, TrainError

_EXPORTS = {  # name -> module (the training stack: torch): imported on first use
    "train_tokenizer": "vlash.policies.processing.word_tokenizer",
    **dict.fromkeys(("load_episodes", "save_episodes"), ".dataset"),
    **dict.fromkeys(("Episode", "record_episodes", "success_rate"), ".episodes"),
    **dict.fromkeys(("FrameTable", "Sample", "SampleBatch", "SampleSpec", "build_sample"), ".samples"),
    "dataset_normalizer": ".stats",
    "train": ".trainer",
}

__all__ = [
    "DatasetError",
    "Episode",
    "FrameTable",
    "Sample",
    "SampleBatch",
    "SampleSpec",
    "TrainConfig",
    "TrainError",
    "TrainResult",
    "build_sample",
    "dataset_normalizer",
    "load_episodes",
    "record_episodes",
    "save_episodes",
    "success_rate",
    "train",
    "train_tokenizer",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)
