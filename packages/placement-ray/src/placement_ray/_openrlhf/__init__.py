"""OpenRLHF's placement groups and rank-to-bundle maps, ordered (private)."""
