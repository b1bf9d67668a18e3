"""Features built on the message path (through pipeline/ports.py): the heartbeat host,
scheduling, tidying, exec; tasks later."""
