"""Use cases: box lifecycle, files, exec, TTL, reconciliation, image builds."""
