"""A pickle that runs a command while it is loaded: what a checkpoint file from an untrusted place
may hold. The checkpoint tests plant it and check it is refused before it runs."""

import os


class PlantedPickle:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):  # what a malicious pickle does: run a command while being loaded
        return os.system, (f"touch {self.marker}",)
