"""The agent: loop, providers, tools, prompt assembly, context files, sessions, compaction."""
