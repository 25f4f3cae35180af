"""A fleet on Ray Serve: vlash's runtime as N model replicas (one per GPU) behind an openpi websocket ingress.

- `config`: `FleetConfig`, the schema of `serve run configs/ray/*.yaml` args and what `vlash serve --ray` builds;
- `batch`: a batch of requests (admitted `Infer`s) through `PolicyRuntime.run_batch`, one reply per request (no Ray);
- `openpi_requests`: an openpi frame -> an admitted `Infer` (no Ray);
- `model`: the `ModelReplica` deployment (the runtime, `@serve.batch`, health);
- `ingress`: the `OpenpiIngress` deployment (FastAPI websocket + /healthz, retries on a dead replica);
- `app`: `build_app(args)` (the `serve run` import path) and `serve_fleet` (`vlash serve --ray`).

Ray is an optional extra (`pip install 'vlash[fleet]'`): only this package imports it, and only vlash.cli imports
this package: `config` (no Ray, no torch) at once, for the flags of `vlash serve`, the rest lazily.
"""
