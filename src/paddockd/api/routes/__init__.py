"""One module per API resource."""
