"""What the toolkit writes: terminal tables (rich), raw CSV and JSON, and self-contained HTML
reports whose charts are matplotlib SVG inlined in the page (no script, works offline)."""
