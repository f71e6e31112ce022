"""Typed errors of the probe suite (all are :class:`~reward_lens_tl.errors.RewardLensError`)."""

from __future__ import annotations

from ..errors import RewardLensError


class ProbeError(RewardLensError, ValueError):
    """A probe or a probe run that is set up wrongly (bad ``at=``, duplicate names, ...)."""


class TooFewExamplesError(ProbeError):
    """Fewer examples than a statistic needs to mean anything (no infinite effect sizes, no
    correlations of ±1 from two points): the message says how many there are and are needed."""


class ProbeSkip(Exception):  # noqa: N818 - a control-flow signal, not an error the user sees
    """Raised inside a probe's edit function: this probe does not apply to this example.

    The reason is recorded per example in the report (``report.skipped``); the run goes on.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
