"""modelhost: many models behind one endpoint, under memory and disk budgets."""

__version__ = "0.1.0"
