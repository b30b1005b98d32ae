"""What the hosts of a shared store share and what separates them: a private PostgreSQL server (`postgres`) and a
network path to it that a test cuts silently (`netns`)."""
