"""MoTS: Model Trading and Sharing for federated learning, priced by the SWAN mechanism."""

__version__ = "0.1.0"
