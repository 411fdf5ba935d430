"""Session-wide test setup.

The suite runs as ``pytest -n 2`` on two shared cores: one intra-op thread per worker process
avoids oversubscription (two workers each spinning up a full thread pool run slower, not faster).
Subprocesses (the end-to-end runs) set ``OMP_NUM_THREADS=1`` in their own environment.
"""

import torch

torch.set_num_threads(1)
