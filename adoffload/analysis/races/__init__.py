"""Race checks: accesses that threads of a launch may make to one element in an order nobody fixed.

``shared`` is the block race check of shared memory and global arrays (fed by ``forms``, ``values``,
``intervals``, ``guards``, ``global_accesses``, ``global_arrays``; its words in ``messages``); ``kernel``
runs it per kernel; ``global_writes`` finds write-write races on global arrays of CUDA kernels;
``store_seeds`` and ``block_stores`` find the stores several threads or blocks make to one element,
which the derivatives must treat specially or refuse.
"""
