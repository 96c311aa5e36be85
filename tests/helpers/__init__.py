"""What only our tests use (what users and product code share is in `modelhost.testing`):
hostile archives, a gated handler, real store servers."""
