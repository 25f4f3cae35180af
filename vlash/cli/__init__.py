"""The `vlash` command line."""
