"""paddockd: the Paddock server (API, box lifecycle, engine, network rules)."""

__version__ = "0.1.0"
