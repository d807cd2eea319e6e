"""Reliability tooling: apps shared by the fuzz/fault/security tests, and the
load and leak runs (``python -m tests.reliability.load``,
``python -m tests.reliability.leaks``), which are not part of the default
test run. See RELIABILITY.md at the repository root.
"""
