"""The Session: the document the CLI and the window both drive."""
