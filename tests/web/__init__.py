"""Tests of bpmon serve: the watches, the API, auth, events and the command."""
