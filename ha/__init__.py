"""ha package."""
