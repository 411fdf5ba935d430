"""Config keys that change no number a run produces: what is shown, where shared files lie, how often
the run checkpoints. A resume may set them, a report never splits configurations on them, and a
sweep leaves them out of its job names (``conf/train.yaml``'s ``exclude_keys`` lists the same keys)."""

NEUTRAL_KEYS = (
    "trainer.progress",
    "trainer.transcripts_every",
    "trainer.checkpoint_every",
    "trainer.warm_start.cache_dir",
    "imagination.gap_warning",
    "imagination.gap_warning_iterations",
)
