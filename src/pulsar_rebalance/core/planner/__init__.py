"""The global planner: whole-cluster plans (moves and splits together) toward a target spread.

Selectable by name (``GlobalPlanner``) wherever Pulsar's shedders are (``decide``'s ``shedding``);
see :mod:`.global_planner` for the algorithm and the cycle, :mod:`.load_model` for the resource model,
:mod:`.goals` for the goals the search tries in priority order and :mod:`.proposals` for the plan's moves
as a diff of the model's assignment before and after.
"""

from pulsar_rebalance.core.planner.global_planner import (
    PLANNER_NAME,
    GlobalPlanner,
    PlannedUnload,
    PlannerInput,
    PlannerSettings,
    split_candidates,
)

__all__ = ["PLANNER_NAME", "GlobalPlanner", "PlannedUnload", "PlannerInput", "PlannerSettings", "split_candidates"]
