"""Memory plans, re-exported from their home in fedbench.core.plans."""

from fedbench.core.plans import FULL, LABEL_FORMS, Plan, PlanLog, parse_plan

__all__ = ["FULL", "LABEL_FORMS", "Plan", "PlanLog", "parse_plan"]
