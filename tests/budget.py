"""The suite's budget: how much each property test and each exhaustive twin runs
under the hypothesis profile in force (docs/adr/0087).

`make check` on CI runs the `ci` profile, whose run must end within `.ci/run`'s limit
on a slow two-core machine: property tests run half the examples they ask for
(`examples`), derandomized, and the exhaustive twins (every fault point of an
operation, where a sampled twin runs the first, last and evenly spaced points) are
skipped. Elsewhere (`make test`, the `dev` profile) every test runs at its full count;
`DELTALOG_EXHAUSTIVE=1` runs the exhaustive twins under `ci` too, and `make soak`
draws new examples of the model test at length.
"""

from __future__ import annotations

import os

__all__ = ["EXHAUSTIVE", "PROFILE", "examples"]


def _profile_name() -> str:
    explicit = os.environ.get("HYPOTHESIS_PROFILE")
    if explicit:
        return explicit
    on_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false")
    return "ci" if on_ci else "dev"


PROFILE = _profile_name()
_SCALE = 0.5 if PROFILE == "ci" else 1.0
EXHAUSTIVE = PROFILE != "ci" or os.environ.get("DELTALOG_EXHAUSTIVE", "") not in ("", "0")


def examples(asked: int) -> int:
    """The examples a property test that asks for `asked` runs under this profile
    (at least 10, or all it asked for if fewer)."""
    return max(min(asked, 10), round(asked * _SCALE))
