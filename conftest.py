"""The test run's plugins, one concern each (``tests/plugins/``): simulated devices, set up before
JAX's backend starts; ``--changed-since``; and the site built in the background for the site
checks. ``docs/build_and_caches.md`` draws how the site build and its caches fit together."""

pytest_plugins = [
    "tests.plugins.simulated_devices",
    "tests.plugins.changed_since",
    "tests.plugins.site_build",
]
