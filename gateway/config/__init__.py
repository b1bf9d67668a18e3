"""Settings: clawgate.toml + CLAWGATE_* environment, one section per concern."""
