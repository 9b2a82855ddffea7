"""Denotations, Image.* metadata, TFLite metadata hints and the MetadataEdits that write them."""
