"""Pin torch's intra-op thread count for a block and restore it afterwards (the test dirs' fixtures)."""

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
