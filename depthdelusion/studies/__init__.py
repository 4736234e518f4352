"""Studies: commands that train several small models and answer one question each, with their
tables and figures (the persistence probe and the persistence study, `docs/persistence.md`)."""
