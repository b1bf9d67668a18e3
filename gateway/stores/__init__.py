"""The stores room: the gateway state database, one small store per concern.

Below the agent and the pipeline, above core (settings, clock, layout): a store knows its
tables and nothing of who calls it. See docs/architecture.md, "State database".
"""
