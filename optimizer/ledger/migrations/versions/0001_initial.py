"""The first ledger: runs, their costs per phase and capacity type, results, metrics.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), primary_key=True),
            sa.Column("recorded_on", sa.String(10), nullable=False),
        sa.Column("project", sa.String(200), nullable=False),
        sa.Column("method", sa.String(8), nullable=False),
        sa.Column("algorithm", sa.String(32)),
        sa.Column("model_family", sa.String(100), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("repairs", sa.String(64), sa.ForeignKey("runs.id")),
        sa.Column("planned_cost_cents", sa.BigInteger),
        sa.Column("planned_hours", sa.Float),
        sa.Column("budget_cents", sa.BigInteger),
        sa.Column("wall_hours", sa.Float),
        sa.Column("node_hours", sa.Float),
        sa.Column("tags", sa.Text, nullable=False),
        sa.Column("plan", sa.Text),
        sa.Column("spec", sa.Text),
        sa.Column("note", sa.Text, nullable=False),
    )
    op.create_table(
        "run_costs",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("phase", sa.String(100), primary_key=True),
        sa.Column("capacity_type", sa.String(16), primary_key=True),
        sa.Column("cents", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "run_results",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("before", sa.Float, nullable=False),
        sa.Column("after", sa.Float, nullable=False),
    )
    op.create_table(
        "run_metrics",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("phase", sa.String(32)),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("value", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_metrics")
    op.drop_table("run_results")
    op.drop_table("run_costs")
    op.drop_table("runs")
