"""``ptplan compare``: methods by their whole cost (planned run, data generation, forgetting
rework). ``priors`` reads the risk file, ``expect`` is the arithmetic (expected cost, P90,
break-even forgetting probability), ``runner`` plans the candidates (docs/compare.md)."""
