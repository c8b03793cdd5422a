"""partitioners package."""
