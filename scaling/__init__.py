"""Scaling policies (pure): how many nodes a stage needs, and when to change the count."""
