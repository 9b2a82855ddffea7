"""Proof: the converted model run against LiteRT on the same inputs, tensor by tensor."""
