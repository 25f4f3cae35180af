"""Training pi0.5-shaped policies on simulated expert data (flow matching, VLASH future-state offsets,
training-time RTC prefix and FASTER's horizon-aware mix). Entry point: `train(TrainConfig(...))` or
`vlash train`."""

from vlash.policies.word_tokenizer import train_tokenizer
from vlash.train.config import TrainConfig, TrainResult
from vlash.train.dataset import load_episodes, save_episodes
from vlash.train.episodes import Episode, record_episodes, success_rate
from vlash.train.errors import DatasetError, TrainError
from vlash.train.samples import FrameTable, Sample, SampleBatch, SampleSpec, build_sample
from vlash.train.stats import dataset_normalizer
from vlash.train.trainer import train

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
