"""Shared test configuration: hypothesis profiles.

Profiles: `ci` (derandomized, so a CI failure reproduces; modest example count),
`dev` (the default locally) and `debug` (prints every example). `HYPOTHESIS_PROFILE`
picks one explicitly; otherwise `ci` when the `CI` environment variable is set
(and not "0"/"false"), else `dev`.
"""

from __future__ import annotations

import os

from hypothesis import Verbosity, settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60, print_blob=True)
settings.register_profile("dev", deadline=None, max_examples=100)
settings.register_profile("debug", settings.get_profile("dev"), verbosity=Verbosity.verbose)


def _profile_name() -> str:
    explicit = os.environ.get("HYPOTHESIS_PROFILE")
    if explicit:
        return explicit
    on_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false")
    return "ci" if on_ci else "dev"


settings.load_profile(_profile_name())
