"""XLA_FLAGS for a test's subprocess host: tests/conftest.py gives every test process 8 simulated
CPU devices; a host of a two-process run gets 4, so the two together are the 8 of one process."""
import os

FOUR_DEVICES = os.environ["XLA_FLAGS"].replace("device_count=8", "device_count=4")
