"""CockroachDB changefeeds, from the files their cloud storage sink writes, into Delta."""
