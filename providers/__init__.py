"""Price sources: each returns a normalised :class:`ptplan.providers.base.Catalog`."""
