"""The head built both ways from one seed, compared: shapes, axes, outputs and gradients
(:func:`snippets.head_orientation.orientation_report`)."""

from __future__ import annotations

from collections.abc import Sequence

from snippets.head_orientation import orientation_report
from snippets.support.cli import Parser, check_memory, positive_int, reported
from snippets.support.tables import print_report


def main(argv: Sequence[str] | None = None) -> None:
    """Print the two orientations side by side."""
    parser = Parser(__doc__)
    parser.add_argument("--emb", type=positive_int, default=64, help="embedding size")
    parser.add_argument("--vocab", type=positive_int, default=256, help="vocabulary size")
    parser.add_argument("--tokens", type=positive_int, default=32, help="tokens in the batch")
    args = parser.parse_args(argv)
    with reported(args.debug):
        # Kernels, gradients, logits and their float64 differences, with room to spare.
        elements = 10 * args.emb * args.vocab + args.tokens * (8 * args.vocab + 2 * args.emb)
        check_memory(8 * elements, f"--emb {args.emb} --vocab {args.vocab} --tokens {args.tokens}")
    print_report(orientation_report(args.emb, args.vocab, args.tokens), args.json)
