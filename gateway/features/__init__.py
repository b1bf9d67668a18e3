"""Features built on the message path (through pipeline/ports.py): the heartbeat host,
scheduling, tidying and consolidation of memory, exec; tasks later."""
