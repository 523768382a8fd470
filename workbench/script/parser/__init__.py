"""The TVMScript parser: core (scopes, expressions), tir, relax, entry (modules)."""
