"""Stream the first actions of a chunk as soon as they are final (horizon-aware sampling), in ~20 lines.

python examples/stream_actions.py

torch's threads follow `vlash serve`'s rule (all cores but one): on every core a busy machine made a 52 ms step take
seconds. The host's load is printed beside the timings, with a warning when other work inflated them.
"""

import time

import torch

from robot_io.host_load import HostLoad
from vlash.cli.cpu_threads import server_threads
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.examples import random_inputs
from vlash.policies.pi05.weights import build_random
from vlash.sampling import FlowSampler, SamplerConfig

torch.set_num_threads(server_threads())  # not every core: timings that hold up beside other work
model = build_random(load_preset("pi05-tiny"))  # or load_model(config, "model.safetensors")
cfg = model.config
host = HostLoad.now(torch.get_num_threads())  # before the timed work: what else runs here
with torch.no_grad():
    cache = model.prefill(random_inputs(cfg))  # images + prompt, once per observation
    sampler = FlowSampler(SamplerConfig(num_steps=10, schedule="horizon-aware"))
    noise = torch.randn(1, cfg.action_horizon, cfg.action_dim)
    run = sampler.start(lambda x, tau: model.denoise_step(x, tau, cache), noise, shared_time=True)
    start = time.perf_counter()
    for event in run:  # contiguous blocks of final actions, the first after ONE denoise step; then the row's end
        ms = (time.perf_counter() - start) * 1e3
        if not event.done:
            print(f"step {event.step}: actions [{event.start}, {event.stop}) final after {ms:.1f} ms")
print("chunk", tuple(run.result.actions.shape), "in", run.result.steps_run, "steps")
print("\n".join(host.lines()))
