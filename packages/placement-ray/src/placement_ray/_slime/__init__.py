"""slime's layout, train group and rollout engines, built on the generic launch path."""
