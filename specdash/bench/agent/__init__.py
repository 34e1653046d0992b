"""The probe on the host: a stdlib-only agent shipped over SSH as a zipapp, and the client side that runs it.

- `wire`: the records the agent streams back (one JSON line per finished request, plus ticks), both sides;
- `main`: the agent itself (runs on the host with the host's Python, stdlib only);
- `bundle`: builds the zipapp from this package's stdlib-only modules (content-hashed);
- `runner`: the client side (`HostRunner`: ships, starts and reads the agent over an `SSHHost`).
"""
