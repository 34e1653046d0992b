"""Reaching a host: the `Host` interface and its asyncssh implementation."""
