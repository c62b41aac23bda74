"""The box image: base from mmdebstrap (or a registry image), then cached layers."""
