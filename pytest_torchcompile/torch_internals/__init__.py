"""Every use of torch internals (``torch._inductor``, ``torch._dynamo``, ``torch._functorch``,
``torch._ops``, dispatch modes, pytree), one module per concern.

These APIs move between releases; keeping them here means one package to fix and to test against
each supported torch (2.11, 2.13 and 2.14). Where a torch lacks an internal that an optional
feature needs, the feature does without it and ``availability.features_off`` names it, with the
internal. ``graph_compile``, ``fp64`` and ``unwritten`` are also embedded whole in every full repro
file (``repros.runtime``): they may import nothing but the standard library and torch.
"""
