"""The test run's pytest plugins, one concern each, registered by the root ``conftest.py``
(``pytest_plugins``): simulated devices, ``--changed-since``, and the background site build."""
