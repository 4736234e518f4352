"""CLI subcommands of the data package: `depthdelusion prepare-data`."""
from __future__ import annotations

import json


def run_prepare(args) -> int:
    from depthdelusion.data.prepare import prepare

    source = None if args.source == "builtin" else args.source
    meta = prepare(source, args.out, tokenizer=args.tokenizer, seq_len=args.seq_len,
                   max_train_tokens=args.max_train_tokens, data_format=args.format, seed=args.seed)
    print(json.dumps(meta, indent=2))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "prepare-data",
        help="tokenize and pack a corpus into ArrayRecord shards for fast, exactly resumable training",
        description="Tokenize SOURCE (a SlimPajama root, .jsonl/.jsonl.zst/.txt files, or "
        "'builtin') once and write packed windows of seq_len + 1 tokens as ArrayRecord. "
        "Train on the result with --set data.path=OUT.",
    )
    parser.add_argument("source", metavar="SOURCE", help="dataset path (local or gs://), or 'builtin'")
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.add_argument("--tokenizer", default="gpt2", choices=["gpt2", "bytes"])
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--format", default="auto", choices=["auto", "slimpajama", "jsonl", "text"])
    parser.add_argument("--max-train-tokens", type=int, default=None,
                        help="stop after about this many training tokens (default: all)")
    parser.add_argument("--seed", type=int, default=42, help="built-in corpus documents (builtin only)")
    parser.set_defaults(func=run_prepare)
