"""The usage prior: tools the copilot's agents ran without error before rank a little higher."""
