"""What the core records about itself: events, memory readings and statistics.

These sit below everything that emits them (the host, the tiers, the pool, the workers) and
everything that presents them (`observe/`, `http/`), which import them and never each other.
"""
