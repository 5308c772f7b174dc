"""What is known about servers and their tools: server lists, crawling, records and catalog snapshots."""
