"""modelhost inside other serving systems' routers (Ray Serve); each one an optional extra."""
