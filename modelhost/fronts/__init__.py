"""Front processes beside the main one: they share its port, answer hits, relay the rest.

With `--fronts N` the kernel spreads the port's connections over the main process and N - 1
fronts (`SO_REUSEPORT`). A front answers plain hits itself, straight from a worker holding the
model (its direct socket in the run dir), through the table the main process publishes, and
reports them back; every other request turns its connection into one relayed byte for byte to
the main process, after a preamble naming the client (docs/decisions.md, "Fronts").
"""
