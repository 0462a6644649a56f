"""Notes every framework's render shares."""

from __future__ import annotations

from ptplan.rendering.frameworks import Run


def unpacked_note(run: Run) -> list[str]:
    """The render always writes token budgets (dynamic batching); a plan priced without
    sequence packing says the job it starts differs from the one it priced."""
    if run.packed:
        return []
    return ["the spec sets efficiency.sequence_packing: false, so the plan priced micro-batches "
            "of micro_batch_size sequences each; this render writes token budgets (dynamic "
            "batching), which run fewer micro-batches than priced: re-plan without "
            "sequence_packing: false for the plan to price the job this render starts"]
