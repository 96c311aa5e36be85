"""The toolkit: `bench`, `tune`, `simulate` and `cost`. Needs the `toolkit` extra."""
