"""The capability checks, by topic: plain JAX, one capability each, run under one mesh axis type.

Each topic module registers its checks with :func:`~snippets.measure.mode_checks.registry.check`.
Importing this package imports the topics in the order below: the order of
:data:`~snippets.measure.mode_checks.registry.CHECKS`, which the report and its tables keep.
"""

# isort: off
from snippets.measure.mode_checks import layouts, products, indexing, transformations  # noqa: F401
from snippets.measure.mode_checks import reshapes, extensions, model  # noqa: F401
# isort: on
