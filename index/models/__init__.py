"""The embedding model: loading it offline, its int8 form and its traced query encoder."""
