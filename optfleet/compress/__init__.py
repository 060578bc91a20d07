"""The extractive prompt compressor of Compress-and-Route (Chen et al., FleetOpt, section 5): a library, not a
problem kind.  ``compress(text, budget_tokens, output_tokens)`` returns the prompt cut to ``T_c = B - L_out``
tokens; ``optfleet compress FILE --budget-tokens N`` is its command.  Needs the ``compress`` extra
(scikit-learn, rouge-score); importing this package imports neither."""

from optfleet.compress.compressor import CATEGORIES, Compression, compress, prepare, select
from optfleet.compress.selection import Objective
from optfleet.compress.text import approx_tokens, split_sentences

__all__ = ["CATEGORIES", "Compression", "Objective", "approx_tokens", "compress", "prepare", "select", "split_sentences"]
