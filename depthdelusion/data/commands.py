"""`depthdelusion prepare-data`: a plain function of the parsed arguments (the parser is
`depthdelusion.cli`)."""
from __future__ import annotations

import json

from depthdelusion import exit_codes
from depthdelusion.training_options import PrepareOptions


def run_prepare(*, source: str, out: str, options: PrepareOptions = PrepareOptions()) -> int:
    from depthdelusion.data.prepare import prepare

    meta = prepare(None if source == "builtin" else source, out, tokenizer=options.tokenizer,
                   seq_len=options.seq_len, max_train_tokens=options.max_train_tokens,
                   data_format=options.format, seed=options.seed, tfds_dir=options.tfds_dir,
                   tfds_text_feature=options.tfds_text_feature)
    print(json.dumps(meta, indent=2))
    return exit_codes.OK


run_prepare.option_groups = {"options": PrepareOptions}  # built by depthdelusion.cli
