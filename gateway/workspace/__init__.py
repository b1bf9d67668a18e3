"""A person's workspace: where each file lives, who may read or write it, creating it."""
