"""CLI subcommands of the data package: `depthdelusion prepare-data`."""
from __future__ import annotations

import json


def run_prepare(args) -> int:
    from depthdelusion.data.prepare import prepare

    source = None if args.source == "builtin" else args.source
    meta = prepare(source, args.out, tokenizer=args.tokenizer, seq_len=args.seq_len,
                   max_train_tokens=args.max_train_tokens, data_format=args.format, seed=args.seed,
                   tfds_dir=args.tfds_dir, tfds_text_feature=args.tfds_text_feature)
    print(json.dumps(meta, indent=2))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "prepare-data",
        help="tokenize and pack a corpus into a TFDS ArrayRecord dataset for fast, exactly resumable training",
        description="Tokenize SOURCE (a SlimPajama root, .jsonl/.jsonl.zst/.txt files, a TFDS text "
        "dataset tfds:NAME[:CONFIG], or 'builtin') once and write packed windows of seq_len + 1 "
        "tokens as the TFDS dataset depthdelusion_windows/TOKENIZER_seqSEQ_LEN (ArrayRecord) under "
        "OUT. Train on the result with --set data.path=OUT. A directory prepared before "
        "prepare-data wrote TFDS is converted as it is (its own tokenizer and seq_len; no re-tokenizing).",
    )
    parser.add_argument("source", metavar="SOURCE",
                        help="dataset path (local or gs://), tfds:NAME[:CONFIG], or 'builtin'")
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.add_argument("--tokenizer", default="gpt2", choices=["gpt2", "bytes"])
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--format", default="auto", choices=["auto", "slimpajama", "jsonl", "text"])
    parser.add_argument("--max-train-tokens", type=int, default=None,
                        help="stop after about this many training tokens (default: all)")
    parser.add_argument("--seed", type=int, default=42, help="built-in corpus documents (builtin only)")
    parser.add_argument("--tfds-dir", default=None, metavar="DIR",
                        help="TFDS data directory for a tfds: SOURCE (default: $TFDS_DATA_DIR or ~/tensorflow_datasets)")
    parser.add_argument("--tfds-text-feature", default="text", metavar="NAME",
                        help="the text feature of a tfds: SOURCE ('a/b' if nested)")
    parser.set_defaults(func=run_prepare)
