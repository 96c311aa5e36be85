"""What the core records about itself."""
