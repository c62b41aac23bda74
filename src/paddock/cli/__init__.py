"""The `paddock` command: a thin shell over the SDK, one module per noun."""
