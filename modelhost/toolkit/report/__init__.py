"""What the toolkit writes: terminal tables, CSV and JSON, and self-contained HTML reports."""
