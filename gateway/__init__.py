"""clawgate's gateway: configuration, routing, sessions, prompt assembly and the agent loop."""

__version__ = "0.1.0"
