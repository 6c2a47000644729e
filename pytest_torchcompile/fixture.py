"""The ``compile_accuracy`` fixture: what a test calls to check a model."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_torchcompile.common import allowed, settings
from pytest_torchcompile.run.session import CURRENT_ITEM_KEY, SESSION_KEY, AccuracySession


class CompileAccuracy:
    """``compile_accuracy(model_or_fn, *args, **kwargs)``: the compiled output when it matches the
    fp64 rule, else the test fails with a report and a repro.

    Keywords named like the marker's options (``tol=``, ``mode=``, ``inductor_config=``, ...)
    override them for this call; all other keywords go to the model. Use :meth:`check` when the
    model itself takes a keyword of the same name.

    One object serves the whole session and acts for the test running now, so that hypothesis'
    ``@given`` tests may use it (a function-scoped fixture would fail its health check).
    """

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    @property
    def enabled(self) -> bool:
        return self._state.enabled

    @property
    def _state(self) -> AccuracySession:
        return self._config.stash[SESSION_KEY]

    @property
    def _item(self) -> pytest.Item:
        item = self._config.stash.get(CURRENT_ITEM_KEY, None)
        if item is None:
            raise pytest.UsageError("compile_accuracy can only be called while a test runs")
        return item

    def __call__(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # a keyword's usage error shows as the test's line alone
        overrides = {k: kwargs.pop(k) for k in list(kwargs) if k in settings.KEYWORDS}
        return self.check(fn, args, kwargs, **overrides)

    def settings(self, **overrides: Any) -> settings.CheckSettings:
        """The settings a check in this test would use, with ``overrides`` applied; a usage
        error for a keyword given a value it does not take."""
        __tracebackhide__ = True
        try:
            return self._state.settings_for(self._item, overrides)
        except pytest.UsageError as error:
            raise pytest.UsageError(str(error)) from None

    def check(
        self,
        fn: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> Any:
        __tracebackhide__ = True
        item = self._item

        def record_property(name: str, value: object) -> None:
            item.user_properties.append((name, value))

        hypothesis_test = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        try:
            return self._state.check(
                item.nodeid,
                fn,
                args,
                kwargs or {},
                self.settings(**overrides),
                record_property,
                supersede=hypothesis_test,
            )
        except allowed.ConfigValueRefused as refused:
            source = settings.FIXTURE if "inductor_config" in overrides else settings.MARKER
            raise pytest.UsageError(refused.line(source)) from None


@pytest.fixture(scope="session")
def compile_accuracy(pytestconfig: pytest.Config) -> CompileAccuracy:
    """Check a model compiled by torch.compile (Inductor) against eager and fp64 references."""
    return CompileAccuracy(pytestconfig)
