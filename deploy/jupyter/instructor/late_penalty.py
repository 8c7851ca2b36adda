"""The course's late-submission rule, as an nbgrader LateSubmissionPlugin.

Each started day after the due date costs `fraction_per_day` of the notebook's score; from
`zero_after_days` days on the notebook scores zero. nbgrader calls `late_submission_penalty` once per
submitted notebook during autograding and caps the result to [0, score] itself.

Configure (instructor nbgrader_config.py):
    c.AssignLatePenalties.plugin_class = "late_penalty.DailyLatePenalty"
    c.DailyLatePenalty.fraction_per_day = 0.1
"""
from __future__ import annotations

import math

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float, Int, TraitError, validate

SECONDS_PER_DAY = 24 * 60 * 60


class DailyLatePenalty(LateSubmissionPlugin):
    """Penalty = score * fraction_per_day * (started days late), zero score after `zero_after_days`."""

    fraction_per_day = Float(0.1, help="Share of the score lost per started day late (0..1).").tag(config=True)
    zero_after_days = Int(7, help="A submission this many days late (or more) scores zero.").tag(config=True)

    @validate("fraction_per_day")
    def _check_fraction(self, proposal):
        value = proposal["value"]
        if not 0.0 <= value <= 1.0:
            raise TraitError(f"DailyLatePenalty.fraction_per_day must be within [0, 1], got {value}")
        return value

    @validate("zero_after_days")
    def _check_days(self, proposal):
        value = proposal["value"]
        if value < 1:
            raise TraitError(f"DailyLatePenalty.zero_after_days must be at least 1, got {value}")
        return value

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        if total_seconds_late <= 0:
            return None
        days_late = math.ceil(total_seconds_late / SECONDS_PER_DAY)
        if days_late >= self.zero_after_days:
            penalty = score
        else:
            penalty = min(score, score * self.fraction_per_day * days_late)
        self.log.warning(
            "%s is %d day(s) late: penalty %.3f of %.3f points", student_id, days_late, penalty, score
        )
        return penalty
