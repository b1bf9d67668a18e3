"""Acting, contained: shell commands in a per-person bubblewrap sandbox.

Leaf modules, not yet wired into the message path (docs/exec.md says what a command can
reach):
- `sandbox`: `Sandbox.open` (probes; `SandboxUnavailable` says why and what to do) and
  `Sandbox.run(RunRequest) -> RunResult`; there is no way to run a command without bwrap;
- `view`: what a command sees (the workspace at /workspace, its top level and protected
  parts read-only), `seccomp`, `cgroups` (a pids and memory group per run where one can be
  made), `process` (bubblewrap forked off the event loop), `disk`, `output`;
- `proxy` and `forward`: network for a person the owner allows, public addresses only;
- `command` and `allowlist`: which commands may run without asking (parsed, never substrings);
- `binding`: what an approval is bound to (command, directory, network, scripts' hashes);
- `settings`: `ExecSettings`, the limits (`[exec]` once wired).
"""
