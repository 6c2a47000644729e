"""pytest-torchcompile: checks torch.compile (Inductor) against an fp64 reference in a test
suite, and turns each miscompilation into a standalone, minified repro.

The pytest plugin is ``pytest_torchcompile.plugin`` (entry point ``torchcompile``); the command
line tool is ``python -m pytest_torchcompile``."""
