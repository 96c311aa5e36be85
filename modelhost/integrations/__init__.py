"""Optional bridges to other serving systems' routers."""
