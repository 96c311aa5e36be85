"""Front processes sharing the main port: they answer hits from the workers and relay the rest
(docs/decisions.md, "Fronts")."""
