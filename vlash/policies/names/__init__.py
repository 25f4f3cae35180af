"""What a `--policy` value names (a shipped policy, a directory, an artifact, a preset) for the CLI."""
