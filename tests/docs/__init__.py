"""Every command the docs show, run as written."""
