"""Studies: commands that train or read small models and answer one question each, with their
tables and figures (persistence, depth expansion, representation spectra, data exponent)."""
