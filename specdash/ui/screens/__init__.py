"""The dashboard, help and modal screens."""
