"""Adversarial agents: each test is one attack an agent with a shell can make on kairo-orch,
its user's repository or its sibling agents, run for real, and what must stop or report it.

`make attack` runs them and prints a count a reproduction; `make test` runs them too.
"""
