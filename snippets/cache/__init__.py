"""Content-keyed caching: what code reads, found from its source (:mod:`~snippets.cache.inputs`),
and results computed once per content of those inputs (:mod:`~snippets.cache.results`). The site's
execution cache keys each guide on the same inputs (``docs/_ext/execution_cache.py``)."""
