"""Campaigns (``ptplan plan CAMPAIGN.yaml``): stages, each a spec, with dependencies and one
deadline and budget. ``model`` reads the campaign file, ``milp`` chooses one point of each
stage's cost–time frontier (pure numbers), ``handover`` prices what one stage hands the next,
``runner`` plans it all and ``check`` re-checks a campaign JSON (docs/campaigns.md)."""
