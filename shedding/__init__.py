"""shedding package."""
