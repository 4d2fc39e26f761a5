"""Fakes at the network boundary: local servers that speak the platforms' protocols."""
