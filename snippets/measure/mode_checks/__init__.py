"""The capability checks, by topic: plain JAX, one capability each, run under one mesh axis type.

Each topic registers its checks with :func:`~snippets.measure.mode_checks.registry.check`, in the
order this package imports the topics: the order the report and its tables keep."""

# isort: off
from snippets.measure.mode_checks import layouts, products, indexing, transformations  # noqa: F401
from snippets.measure.mode_checks import reshapes, extensions, model  # noqa: F401
# isort: on
