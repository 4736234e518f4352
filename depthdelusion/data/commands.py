"""`depthdelusion prepare-data`: a plain function of the parsed arguments (the parser is
`depthdelusion.cli`)."""
from __future__ import annotations

import json

from depthdelusion import exit_codes


def run_prepare(*, source: str, out: str, tokenizer: str = "gpt2", seq_len: int = 1024,
                data_format: str = "auto", max_train_tokens: int | None = None, seed: int = 42,
                tfds_dir: str | None = None, tfds_text_feature: str = "text") -> int:
    from depthdelusion.data.prepare import prepare

    meta = prepare(None if source == "builtin" else source, out, tokenizer=tokenizer, seq_len=seq_len,
                   max_train_tokens=max_train_tokens, data_format=data_format, seed=seed,
                   tfds_dir=tfds_dir, tfds_text_feature=tfds_text_feature)
    print(json.dumps(meta, indent=2))
    return exit_codes.OK
