"""grain worker processes (`data.workers` > 0), shared by the streaming and the prepared reader."""
from __future__ import annotations

import grain


def prefetch_in_workers(ds: grain.IterDataset, workers: int) -> grain.IterDataset:
    """`ds` produced by `workers` processes. grain's workers read absl flags, which nobody
    parses outside an absl app, so they are marked parsed here first."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
