"""Plumbing every room uses (the core layer): logs, redaction, output, versioning (git)."""
