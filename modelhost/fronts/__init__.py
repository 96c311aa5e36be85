"""Front processes beside the main one: they share its port and relay connections to it.

With `--fronts N` the kernel spreads the port's connections over the main process and N - 1
fronts (`SO_REUSEPORT`). A front relays each connection's bytes to the main process over a Unix
socket in the run dir, after a preamble naming the client, so every answer stays the main
process's own (docs/decisions.md, "Fronts").
"""
