"""The shipped scenarios, a module per family; ``scenarios/make_scenarios.py`` writes them."""
