"""verl's resource pools on placement-ray's ordered, pinned reservation (private)."""
