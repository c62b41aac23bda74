"""The box engine driver: a Protocol (`base`), Docker (`docker`), a fake for tests."""
