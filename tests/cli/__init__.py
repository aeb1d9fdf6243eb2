"""Tests of ``arecall.cli``."""
