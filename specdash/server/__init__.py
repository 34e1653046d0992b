"""Server lifecycle (start, stop, attach, switch) and the watcher that merges log, liveness and health."""
