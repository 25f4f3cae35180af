"""The policy server: `runtime` (request -> stream of final actions, shared with the evaluation harness),
`server` (ZeroMQ ROUTER + model thread), `config`, `loading` (what `vlash serve` loads), `random_policy`."""
