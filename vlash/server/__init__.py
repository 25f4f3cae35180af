"""The policy server: `server` (ZeroMQ ROUTER + model thread), `worker`, `jobs`, `requests`, `config`, `stats`.
The request -> chunk path it runs lives in vlash.runtime."""
