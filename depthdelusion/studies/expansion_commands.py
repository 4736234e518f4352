"""CLI subcommand `depthdelusion expand`: grow a trained run's depth, or probe where growing helps."""
from __future__ import annotations

import json


def run_expand(args) -> int:
    from etils import epath

    if args.probe:
        from depthdelusion.analysis.runs import INSERTION_PROBE
        from depthdelusion.studies.expansion_probe import ETAS, markdown, probe_run

        etas = [float(x) for x in args.etas.split(",")] if args.etas else ETAS
        result = probe_run(args.run, n_batches=args.batches, etas=etas, seed=args.seed)
        text = markdown(result)
        # by default beside the run, where the report's persistence figure finds it
        out = epath.Path(args.out) if args.out else epath.Path(args.run) / INSERTION_PROBE
        out.mkdir(parents=True, exist_ok=True)
        (out / "probe.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "probe.md").write_text(text)
        print(text)
        print(f"probe written to {out}")
        return 0
    if not args.after or not args.out:
        raise ValueError("expand: give --after K[,K...] and --out DIR (or --probe)")
    from depthdelusion.studies import expansion

    cfg = expansion.read_run_config(args.run)
    after = expansion.parse_after(args.after, cfg.model.depth)
    record = expansion.expand_run(args.run, after, args.out, seed=args.seed, overrides=args.overrides)
    print(json.dumps(record))
    print(f"expanded run written to {args.out}; train it on with: depthdelusion train --out {args.out}")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "expand",
        help="insert zero-output blocks into a trained run (new run directory), or --probe the "
             "first-order signal of such a block at every layer",
        description="Depth expansion. With --after: write a new run directory whose checkpoint has "
        "a block inserted after each given block (0 = bottom), initialised like a fresh block with "
        "zero attention-output and MLP-down projections, so the function is unchanged; it resumes "
        "with the parent's data position. With --probe: the loss gradient w.r.t. those projections "
        "at every insertion point on train and held-out batches, the jumpboard step, and the "
        "activation-gradient covariance.")
    parser.add_argument("run", metavar="RUN", help="a trained run directory (with checkpoints/)")
    parser.add_argument("--after", metavar="K[,K...]", help="insert a block after each of these blocks")
    parser.add_argument("--out", metavar="DIR", help="the new run directory (--probe: where probe.json/md go; default RUN/expansion_probe, "
                             "which the report's persistence figure reads)")
    parser.add_argument("--seed", type=int, default=0, help="draw of the inserted blocks (default 0)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="train.* fields of the new run, e.g. --set train.steps=600 (repeatable)")
    parser.add_argument("--probe", action="store_true", help="measure instead of expanding")
    parser.add_argument("--batches", type=int, default=16, help="--probe: train and held-out batches each")
    parser.add_argument("--etas", metavar="E[,E...]", help="--probe: jumpboard step sizes")
    parser.set_defaults(func=run_expand)
    from depthdelusion.studies import expansion_study

    expansion_study.register(subparsers)
