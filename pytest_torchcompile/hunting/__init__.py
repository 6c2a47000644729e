"""The hunt and what it draws: hypothesis strategies for model inputs (``tensors``), for whole
torch programs (``program``, ``builder``, the op catalogue in ``ops/``, ``drawing``), and the
``hunt`` verb's engine that checks drawn programs and reduces their failures to root causes
(``hunt``, ``causes``). Users import the strategies from ``pytest_torchcompile.strategies``."""
