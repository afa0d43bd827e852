"""A simulation of trainkit's Modal containers as strict as Modal's (see `deploy.py`)."""
