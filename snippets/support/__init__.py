"""Support: command-line plumbing, the config base, tables, figures, timing, quoted figures."""
