"""Tests of ``arecall.evaluate``."""
