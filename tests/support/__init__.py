"""Plain modules the tests share (helpers and example inputs, no fixtures and no tests): a test imports from
here, never from a conftest.py or from another test module."""
