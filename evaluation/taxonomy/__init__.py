"""Why each unsuccessful task failed: the paper's Retrieve / Query / Tool / Other classes, decided
from the log (``classify``), with the route queries checked against the index (``capability``)
and, for what the log cannot decide, an optional cached LLM second opinion (``second_opinion``)."""
