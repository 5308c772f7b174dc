"""``execute``: the params check against the tool's schema, and results on their way back."""
