"""Analyses over TIR: verification, and later access regions and features."""
