"""Background tasks: a sub-agent with its own session that reports back once (docs/tasks.md).

desk.py starts them (made before the gateway's parts: the tool is a private tool), tool.py is
the `start_task` tool, runner.py runs them (a service made from the parts), report.py makes
the one report, the words shown in a chat are in
gateway/pipeline/task_words.py (/tasks uses them too).
"""
