"""The stores room: the gateway state database, one small store per concern.

Above the agent (the usage ledger counts in the agent's `Usage`), below the pipeline: a store
knows its tables and nothing of who calls it. database.py owns the connections, migrations.py
every table, state.py opens them together. See docs/architecture.md, "State database".
"""
