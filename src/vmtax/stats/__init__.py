"""Pure statistics: no I/O, no clocks.  Checked against scipy and by
property tests (tests/test_stats.py).

summary   one side: the mean and its interval over process means, best k of n,
          a ratio's relative half-width, geometric mean, Jain's index, an
          unpaired ratio
signflip  the sign-flip test over blocks paired in random order, its interval,
          and the label-free precision the runner stops on
modes     two modes among process means
strata    the test over strata (StratifiedTest) and within the host's modes
          (ModeTest)
ranks     the median block: the Hodges-Lehmann ratio over blocks, the
          signed-rank test and its interval (compare --median)
state     whether a candidate's ratio moves with the host's state (host_state)

Every name is re-exported here: `from vmtax import stats; stats.summarize`
and `from vmtax.stats import jain` work as they did when this was one module."""

from .modes import (
    MODES_BIC_GAIN,
    MODES_LOG_FLOOR,
    MODES_MIN_GAP,
    MODES_MIN_SHARE,
    MODES_MIN_UNITS,
    MODES_SEPARATION,
    modes,
)
from .ranks import EXACT_RANKS, RankTest, blocks_to_call, compare_ranked
from .signflip import (
    DRAWS,
    EXACT_PAIRS,
    MIN_BLOCKS,
    PairedTest,
    as_pairs,
    compare_paired,
    paired,
    sign_chunks,
    stop_halfwidth,
)
from .state import STATE_CHANCE, STATE_MIN_BLOCKS, TaxMoves, host_state, tax_change, tax_moves, tax_summary
from .strata import (
    FAST,
    MODE_AGREE,
    MODE_MARGIN,
    MODE_MIN_PAIRS,
    SAME,
    SLOW,
    STRATUM_MIN,
    ModeTest,
    StratifiedTest,
    compare_strata,
    mode_sides,
    stop_halfwidth_strata,
)
from .summary import (
    CONFIDENCE,
    best_k_of_n,
    cluster_means,
    geomean,
    jain,
    ratio_ci_rel,
    ratio_over_replicates,
    ratio_unpaired,
    summarize,
    t_quantile,
    welch_df,
)

__all__ = [
    "CONFIDENCE",
    "DRAWS",
    "EXACT_PAIRS",
    "EXACT_RANKS",
    "FAST",
    "MIN_BLOCKS",
    "MODES_BIC_GAIN",
    "MODES_LOG_FLOOR",
    "MODES_MIN_GAP",
    "MODES_MIN_SHARE",
    "MODES_MIN_UNITS",
    "MODES_SEPARATION",
    "MODE_AGREE",
    "MODE_MARGIN",
    "MODE_MIN_PAIRS",
    "SAME",
    "SLOW",
    "STATE_CHANCE",
    "STATE_MIN_BLOCKS",
    "STRATUM_MIN",
    "ModeTest",
    "PairedTest",
    "RankTest",
    "StratifiedTest",
    "TaxMoves",
    "as_pairs",
    "best_k_of_n",
    "blocks_to_call",
    "cluster_means",
    "compare_paired",
    "compare_ranked",
    "compare_strata",
    "geomean",
    "host_state",
    "jain",
    "mode_sides",
    "modes",
    "paired",
    "ratio_ci_rel",
    "ratio_over_replicates",
    "ratio_unpaired",
    "sign_chunks",
    "stop_halfwidth",
    "stop_halfwidth_strata",
    "summarize",
    "t_quantile",
    "tax_change",
    "tax_moves",
    "tax_summary",
    "welch_df",
]
