"""The policy server: `server` (ZeroMQ ROUTER + model thread), `worker`, `jobs`, `requests`, `config`, `stats`, and
openpi's websocket protocol as an adapter in front of it (`openpi_endpoint`, `openpi_codec`, `openpi_mapping`).
The request -> chunk path it runs lives in vlash.runtime."""
