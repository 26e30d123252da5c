"""What the engine knows about a body before it changes it: every fact-finding pass in one place.

Control flow (dominators, natural loops, inductions), static trip bounds, the classes of addresses
threads update (which shadow updates may race), uniformity across the threads of a block and between
blocks, and the race checks (``races/``). The AD engine, the code generator and the CUDA import ask
these passes; none of them imports back from those stages.
"""
