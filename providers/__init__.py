"""Price sources: each returns a normalised :class:`providers.base.Catalog`."""
