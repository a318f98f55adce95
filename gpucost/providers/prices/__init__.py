"""Each provider's live price source (a :class:`~gpucost.pricing.sources.base.PriceSource`),
named by its declaration's ``price_source`` and imported only by the pricing registry."""
