"""The neutral graph every stage reads, typed errors and size limits."""
