"""What a person can add to their assistant: skills (SKILL.md folders) and MCP tool servers.

Both are decided per context (gateway/capabilities/contexts.py): a group never sees the owner's
skills nor, unless configured, any MCP server's tools. `Capabilities` (hub.py) is the one object
the Gateway holds; everything else here has one job each.
"""
