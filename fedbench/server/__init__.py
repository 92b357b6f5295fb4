"""The server side: the round loop, its hooks and close policies, selection composed with Flower."""
