"""Price sources that are not one provider's: the SkyPilot catalog importer and hosted
catalog, and the base classes every live source builds on."""
