"""How a grid kernel's launch is shaped on a GPU (no GPU needed: the rule is plain arithmetic)."""
from adoffload.runtime.gpu import spread_block


def test_small_grids_use_smaller_blocks_to_reach_every_multiprocessor():
    assert spread_block(10_976, 256, 132) == 64          # 172 blocks, not 43
    assert spread_block(1 << 24, 256, 132) == 256        # big grids keep their block
    assert spread_block(100, 256, 132) == 64             # never below 64 threads (an AMD wavefront)
    assert spread_block(10_976, 256, 0) == 256           # the count unknown: unchanged
    assert spread_block(10_976, 640, 132) == 160         # halves stay whole warps: 160 is not halved
    assert spread_block(10_976, 96, 132) == 96
    for total in range(1, 200_000, 997):
        block = spread_block(total, 256, 132)
        blocks = -(-total // block)
        assert block in (64, 128, 256)
        assert block == 256 or -(-total // (2 * block)) < 132      # halved only when twice left SMs idle
        assert block == 64 or blocks >= 132                        # and no further than needed
