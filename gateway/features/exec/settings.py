"""`ExecSettings` lives with the other settings sections (gateway/config/exec.py); this name
stays for the sandbox's modules and their tests."""

from gateway.config.exec import ExecSettings

__all__ = ["ExecSettings"]
