"""The use cases: what `start`, `resume`, `stop`, `clean` and the read-only commands do,
each returning a frozen result for whoever asked (the CLI renders it; a later HTTP API or
web view would use the same). Nothing here prints; what happens along the way is told
through a `Notify` (notes.py). Imports nothing: each use case is its own module, so that a
command loads only what it runs."""
