"""The `clawgate` command line: one module per command group."""
