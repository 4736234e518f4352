"""Studies that read trained runs: measurements beyond the training records."""
