"""`canine validate DIR`: exit 0 if every shard obeys the contract and the manifest, 1 otherwise."""

import sys


def add_arguments(p):
    p.add_argument("directory", metavar="DIR", help="a shard directory (fsspec URL), the output of canine preprocess")


def main(args) -> int:
    from pipeline.output.validate import validate

    problems, count, summary = validate(args.directory)
    if count:
        print(f"canine validate: {args.directory}: {count} problem(s)", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        if count > len(problems):
            print(f"  ... and {count - len(problems)} more", file=sys.stderr)
        return 1
    print(f"{args.directory}: valid ({summary['examples']} examples in {summary['shards']} shards)")
    return 0
