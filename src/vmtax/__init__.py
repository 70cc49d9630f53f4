"""vmtax: measure and explain the virtualization tax."""

__version__ = "0.1.0"
