"""The web for the assistant: fetching pages safely, extracting their text, searching.

`addresses` decides which hosts may be reached, `fetch` gets one page within limits,
`extract` turns it into Markdown, `links` decides which URLs a conversation may fetch, and
`search` holds the search backends. The tools themselves are in gateway/agent/tools/web_tools.py.
"""
