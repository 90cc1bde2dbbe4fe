"""Support: command-line plumbing, config, tables, figures, timing, quoted figures, check outcomes."""
