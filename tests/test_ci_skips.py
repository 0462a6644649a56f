"""The conftest hook that turns silent skips into failures when ``CI`` is set."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

BODY = """
import pytest

def test_silent():
    pytest.skip("optional dependency missing")

@pytest.mark.ci_skip_ok(reason="needs a GPU")
def test_allowed():
    pytest.skip("no GPU")

@pytest.mark.xfail(reason="known", strict=True)
def test_xfail():
    raise AssertionError
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest("from ci_skips import pytest_make_collect_report, "
                          "pytest_runtest_makereport  # noqa: F401\n")
    pytester.makeini("[pytest]\nmarkers =\n    ci_skip_ok(reason): allowed\n")
    pytester.makepyfile(test_x=BODY)
    return pytester


def test_a_silent_skip_fails_in_ci(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
                                   ) -> None:
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(["*skipped in CI (*optional dependency missing*"])


def test_skips_are_skips_outside_ci(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
                                    ) -> None:
    monkeypatch.delenv("CI", raising=False)
    suite.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(skipped=2, xfailed=1)
