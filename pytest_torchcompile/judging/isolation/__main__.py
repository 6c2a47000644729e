"""The judging child's entry point: ``python -m pytest_torchcompile.judging.isolation
REQUESTS_FD REPLIES_FD``, started by ``parent.IsolatedJudge``."""

from pytest_torchcompile.judging.isolation.child import child_main

child_main()
