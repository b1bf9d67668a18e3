"""Features built on the message path: acting (exec) first, heartbeats, reminders, tasks later."""
