"""The web dashboard's built assets (from web/, by scripts/build-dashboard) and its page."""
