"""Samplers and optimisers, one file per algorithm."""
