"""Evaluating an external system's runs: authorized metrics over TREC runs, and run fusion."""
