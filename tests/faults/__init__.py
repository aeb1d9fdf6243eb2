"""Fault injection across the pipeline: kill -9, signals, tracking outages, concurrent runs."""
