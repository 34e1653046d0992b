"""Test and benchmark helpers that are not part of the product: the fake SSE server, the simulator harness."""
