"""Availability: failure detection, upstream backup, passive and active standby, recovery."""
