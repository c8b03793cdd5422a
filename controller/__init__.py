"""The controller: policy composition, the control loop, replays, reports and the CLI."""
