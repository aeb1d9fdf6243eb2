"""Tests of ``arecall.io``."""
