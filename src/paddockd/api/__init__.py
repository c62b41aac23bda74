"""HTTP API: app factory, error mapping, auth, one route module per resource."""
