"""Studies: commands that train or read small models and answer one question each, with their
tables and figures (coordinate check, learning-rate transfer, persistence, depth expansion,
representation spectra, data exponent)."""
