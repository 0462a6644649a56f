"""No silent skips in CI: hooks re-exported by ``tests/conftest.py``.

With ``CI`` set (any non-empty value), a test that skips fails unless it carries
``@pytest.mark.ci_skip_ok(reason="why it cannot run in CI")``; a module skipped at import
(``importorskip`` at module level) fails the collection. ``xfail`` is not a skip.
"""

from __future__ import annotations

from typing import Any

import pytest

CI_SKIP_MARK = "ci_skip_ok"


def _in_ci() -> bool:
    import os

    return bool(os.environ.get("CI"))


def _silent_skip(rep: Any, item: Any = None) -> bool:
    if not (rep.skipped and _in_ci()) or hasattr(rep, "wasxfail"):
        return False
    mark = item.get_closest_marker(CI_SKIP_MARK) if item is not None else None
    return mark is None or not (mark.kwargs.get("reason") or mark.args)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    outcome = yield
    rep = outcome.get_result()
    if _silent_skip(rep, item):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = (f"skipped in CI ({reason}); a test that cannot run in CI needs "
                        f"@pytest.mark.{CI_SKIP_MARK}(reason=...), otherwise install what it "
                        "needs in the test extras")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: Any) -> Any:
    outcome = yield
    rep = outcome.get_result()
    if _silent_skip(rep):  # a whole module skipped (importorskip at module level)
        rep.outcome = "failed"
        rep.longrepr = f"module skipped in CI: {rep.longrepr}"
