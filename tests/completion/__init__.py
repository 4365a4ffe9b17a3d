"""Completion under unreliable agents: the scenarios and runs of `make bench-completion`."""
