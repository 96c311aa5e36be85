"""`simulate`: an access log replayed through eviction policies at many memory budgets."""
