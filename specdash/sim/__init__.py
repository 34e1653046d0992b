"""A faithful SGLang stand-in: same flags, log lines and endpoints, a calibrated batch-scheduler model."""
