"""Tests of the Flink collector: parsing on recorded responses, and a real cluster on loopback."""
