"""Support: plumbing: command lines, configs, tables, timing, a workflow's steps run here."""
