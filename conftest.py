"""Simulated devices for every test and doctest: set up before JAX's backend starts."""

from snippets.devices import setup_devices

TEST_DEVICES = 8

setup_devices(TEST_DEVICES)
