"""Capacity booked for the run: plans with capacity blocks and flex-start (schema 6).

``plans`` (:func:`~ptplan.planner.booking.plans.plan_with_bookings`, what ``api.plan`` calls
when the spec has a start date and the catalog bookable offers) solves the plain plan and the
relaxation, then the exact search over subproblems: ``exact`` (objective cost), ``fastest``
(objective time); ``contexts`` holds the subproblems' planning contexts (pool frontiers
shared), ``items`` what the plan says of its bookings.

May import :mod:`ptplan.planner.assembly`, :mod:`ptplan.planner.search`,
:mod:`ptplan.planner.frontier`, :mod:`ptplan.planner.candidates` and the layers below the
planner; never :mod:`ptplan.planner.api`.
"""
