"""Imagined rollouts inside the world model, their bias controls and mixing with real data (planned;
see docs/design.md)."""
