"""A toy feed, kept outside ``lakefeed``: numbered JSON files in a folder (``00001.json``, ``00002.json``, …)
into one Delta table. It exists to show and test what adding a feed takes: this package (its spec,
``spec.py``) and one DAG file, found through ``LAKEFEED_FEED_PACKAGES`` (:func:`lakefeed.feeds.specs`),
with nothing else in the project changed. Its hooks plan and commit on the skeleton's sequences."""
