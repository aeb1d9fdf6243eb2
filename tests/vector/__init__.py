"""Tests of ``arecall.vector``."""
