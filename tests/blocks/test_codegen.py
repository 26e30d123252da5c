"""Block kernels compiled for NVIDIA (checked by ptxas) and AMD (linked by ld.lld)."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu import amdgpu, nvptx, tools
from adoffload.errors import ToolNotFoundError

from . import kernels


def _have(finder):
    try:
        finder()
        return True
    except ToolNotFoundError:
        return False


needs_ptxas = pytest.mark.skipif(not _have(tools.find_ptxas), reason="ptxas not installed (pip install nvidia-cuda-nvcc)")
needs_lld = pytest.mark.skipif(not _have(tools.find_lld), reason="ld.lld not installed (pip install ziglang)")

KERNELS = {"matmul": kernels.tiled_matmul, "reverse": kernels.reverse_in_block, "smooth": kernels.smooth}
BARRIERS = {"matmul": 2, "reverse": 1, "smooth": 3}


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_ptx_uses_shared_memory_and_bar_sync(name, arch):
    ptx = KERNELS[name].compiled("nvptx", arch=arch).artifact
    assert ptx.count("bar.sync") == BARRIERS[name]
    assert ".shared .align 16" in ptx and "st.shared" in ptx and "ld.shared" in ptx
    report = nvptx.ptxas_check(ptx, arch)
    assert "used 1 barriers" in report


# ado.zeros arrays do not compile for AMDGPU yet, in any kernel (allocas outside addrspace 5):
# an engine limit outside block kernels, so `smooth` (which keeps one) is left out there.
AMD_KERNELS = sorted(set(KERNELS) - {"smooth"})


def _gcn(kernel, arch):
    from adoffload.codegen import abi, blocks
    text = kernel.module_text()
    flat = [f.llvm_type for f in kernel.signature.flat_params()]
    module = blocks.add_block_gpu_entry(text, kernel.body_name, flat, kernel.signature.grid_rank, "amdgpu",
                                        kernel.block, tuple((a.nbytes, a.zero) for a in kernel.shared), arch=arch)
    return amdgpu.compile_gcn_assembly(module, arch), abi.kernel_entry_name(kernel.body_name)


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("name", AMD_KERNELS)
def test_gcn_uses_lds_and_s_barrier(name, arch):
    asm, _ = _gcn(KERNELS[name], arch)
    assert asm.count("s_barrier\n") + asm.count("s_barrier ") >= BARRIERS[name]
    assert "ds_write" in asm and "ds_read" in asm


@needs_lld
@pytest.mark.parametrize("name", AMD_KERNELS)
def test_hsaco_links(name):
    hsaco = KERNELS[name].compiled("amdgpu", arch="gfx942").artifact
    assert hsaco[:4] == b"\x7fELF"
    assert amdgpu.kernel_descriptors(hsaco) == [KERNELS[name].body_name + ".kernel.kd"]


def _derived(kernel, mode):
    import adoffload as ado
    return kernel if mode == "primal" else (ado.jvp(kernel, "x") if mode == "jvp" else ado.vjp(kernel, "x"))


@needs_ptxas
@pytest.mark.parametrize("mode", ["primal", "jvp", "vjp"])
@pytest.mark.parametrize("name", ["warp_sum", "warp_max", "shuffle", "block_sum", "block_max"])
def test_warp_and_block_operations_assemble_for_nvidia(name, mode):
    from .warp_kernels import PAIRS
    kernel = _derived(PAIRS[name][0], mode)
    ptx = kernel.compiled("nvptx", arch="sm_90").artifact
    assert "shfl.sync" in ptx or "bar.sync" in ptx
    if name.startswith("warp") or name == "shuffle":
        assert "shfl.sync" in ptx
    nvptx.ptxas_check(ptx, "sm_90")


@needs_lld
@pytest.mark.parametrize("mode", ["primal", "vjp"])
@pytest.mark.parametrize("name", ["warp_sum", "warp_max", "shuffle", "block_sum", "block_max"])
def test_warp_and_block_operations_link_for_amd(name, mode):
    from .warp_kernels import PAIRS
    kernel = _derived(PAIRS[name][0], mode)
    hsaco = kernel.compiled("amdgpu", arch="gfx942").artifact
    assert hsaco[:4] == b"\x7fELF"


def test_amd_wavefronts_are_64_lanes_and_need_whole_wavefronts(tmp_path):
    from adoffload.errors import CompilationError
    from . import warp_kernels
    asm, _ = _gcn(warp_kernels.wsum, "gfx942")
    assert "ds_bpermute_b32" in asm
    small = kernels.reverse_in_block        # 8 threads: fine without warp operations
    _gcn(small, "gfx942")
    from .test_language import _compile
    module = _compile("""
@ado.kernel(block=32)
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    x[i] = ado.warp_sum(x[i])
""", tmp_path)
    with pytest.raises(CompilationError, match=r"whole warps.*32 threads.*warp size 64"):
        _gcn(module.k, "gfx942")
    module.k.compiled("nvptx", arch="sm_90")      # 32 lanes on NVIDIA: fine


@needs_ptxas
@pytest.mark.parametrize("mode", ["jvp", "vjp"])
@pytest.mark.parametrize("name", ["matmul", "reverse"])
def test_derivatives_with_shadow_shared_arrays_assemble(name, mode):
    """Shadow shared arrays are zero-filled by the entry, behind a barrier of its own."""
    import adoffload as ado
    base = KERNELS[name]
    wrt = ("A", "B") if name == "matmul" else "x"
    kernel = ado.jvp(base, wrt) if mode == "jvp" else ado.vjp(base, wrt)
    ptx = kernel.compiled("nvptx", arch="sm_90", noalias=True).artifact
    assert ".shared" in ptx and "bar.sync" in ptx
    nvptx.ptxas_check(ptx, "sm_90")
    if kernel.tape is not None:
        nvptx.ptxas_check(kernel.count_kernel.compiled("nvptx", arch="sm_90").artifact, "sm_90")


@needs_lld
@pytest.mark.parametrize("name", AMD_KERNELS)
def test_reverse_kernels_link_for_amd(name):
    import adoffload as ado
    wrt = ("A", "B") if name == "matmul" else "x"
    hsaco = ado.vjp(KERNELS[name], wrt).compiled("amdgpu", arch="gfx942").artifact
    assert hsaco[:4] == b"\x7fELF"


@needs_ptxas
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_shadow_shared_adds_are_warp_aggregated_on_nvidia(dtype):
    """sm_90 has no native float add on shared memory (a CAS loop per lane): the reverse kernel's
    adds into shadow tiles first combine lanes with equal addresses (codegen/gpu/shared_atomics.py)."""
    import adoffload as ado
    ptx = ado.vjp(kernels.TILED_MATMUL_8[dtype], ("A", "B")).compiled("nvptx", arch="sm_90").artifact
    assert "activemask.b32" in ptx and "match.any.sync.b32" in ptx and "vote.sync.all.pred" in ptx
    assert "shfl.sync.bfly.b32" in ptx
    assert "atom.shared.add.f" in ptx
    nvptx.ptxas_check(ptx, "sm_90")
    plain = kernels.TILED_MATMUL_8[dtype].compiled("nvptx", arch="sm_90").artifact
    assert "activemask" not in plain           # the primal adds nothing into shared memory

def _neighbour_product_kernel(dtype):
    import adoffload as ado

    @ado.kernel(block=(2, 32))
    def neighbour_product(x: ado.In[dtype, 2], y: ado.Out[dtype, 2]):
        """y = own slot times the right neighbour's slot (cyclic) of a shared row: in the adjoint
        the lanes of a warp add at different addresses."""
        i, j = ado.tid()
        ti, tj = ado.thread_id()
        T = ado.shared((2, 32), dtype)
        T[ti, tj] = x[i, j]
        ado.sync_threads()
        y[i, j] = T[ti, tj] * T[ti, (tj + 1) % 32]
    return neighbour_product


@needs_ptxas
def test_shadow_shared_adds_whose_lanes_are_apart_are_plain_atomics():
    """match.any only costs time when every lane of a warp adds at its own address (a stencil's
    adjoint: the address uses the lane's thread index): such adds stay plain atomics, while the
    tiled matmul's (a whole row of lanes on one address) keep the combining."""
    import adoffload as ado
    from adoffload.codegen.gpu.shared_atomics import _warp_axes
    assert _warp_axes((2, 32)) == {1: 32} and _warp_axes((16, 16)) == {1: 16, 0: 2} and _warp_axes((64,)) == {0: 32}
    ptx = ado.vjp(_neighbour_product_kernel(ado.f32), ("x",)).compiled("nvptx", arch="sm_90").artifact
    assert "atom.shared.add.f32" in ptx and "match.any" not in ptx
    nvptx.ptxas_check(ptx, "sm_90")
    matmul = ado.vjp(kernels.TILED_MATMUL_8["f32"], ("A", "B")).compiled("nvptx", arch="sm_90").artifact
    assert "match.any.sync.b32" in matmul


def test_tile_adds_predict_their_lane_groups():
    """8x8 blocks: the adjoint of ``As[ti, k]`` adds from the lanes of one ti (lane bits 0-2: mask 7),
    that of ``Bs[k, tj]`` from the lanes of one tj (bits 3-4: mask 24); codegen/gpu/shared_atomics.py
    calls the grouped add for each (a butterfly over those bits, after a one-vote check unless
    shared_uniform.py proves the address)."""
    from adoffload.codegen.gpu.shared_atomics import _lane_bits, aggregate_shared_adds
    assert _lane_bits((8, 8)) == {1: 7, 0: 24} and _lane_bits((16, 16)) == {1: 15, 0: 16}
    assert _lane_bits((2, 32)) == {1: 31} and _lane_bits((6, 32)) is None
    import adoffload as ado
    from adoffload.ir import import_module
    reverse = ado.vjp(kernels.TILED_MATMUL_8["f64"], ("A", "B"))
    args = import_module(reverse.module_text()).functions[reverse.body_name].args
    shared = [k for k, a in enumerate(args) if a.name.startswith(("shared.", "d_shared."))]
    assert len(shared) == 4
    text, masks = aggregate_shared_adds(reverse.module_text(), reverse.body_name, range(shared[0], shared[-1] + 1),
                                        (8, 8))
    # both addresses are proven the same in their groups (shared_uniform.py): batches of one, no check
    assert masks == {7, 24, ("f64", 7, 1, 0, False), ("f64", 24, 1, 0, False)}
    assert "adoffload.shared_fadd_batch.f64.7.1.0\"" in text and "adoffload.shared_fadd_batch.f64.24.1.0\"" in text
    # a loaded index in the address: the grouped adds keep their check
    reverse = ado.vjp(kernels.permuted_tiled_matmul, ("A", "B"))
    args = import_module(reverse.module_text()).functions[reverse.body_name].args
    shared = [k for k, a in enumerate(args) if a.name.startswith(("shared.", "d_shared."))]
    text, masks = aggregate_shared_adds(reverse.module_text(), reverse.body_name, range(shared[0], shared[-1] + 1),
                                        (8, 8))
    assert masks == {7, 24}
    assert "adoffload.shared_fadd_group.f64.7\"" in text and "adoffload.shared_fadd_group.f64.24\"" in text



@pytest.mark.parametrize("shape, forms", [("8x8", {("f32", 7, 4, 0, True), ("f32", 24, 4, 0, True)}),
                                          ("16x16", {("f32", 15, 8, 0, True), ("f32", 16, 8, 0, True)})])
def test_rows_of_tile_adds_are_batched(shape, forms):
    """The register tile's adjoint adds ``tm`` values in a row into each shadow tile: one batched call
    per row and tile (codegen/gpu/shared_batches.py), which assembles. Every address is proven the same
    in its lane group (analysis/lane_groups.py: thread indices of the other axes, the k counter):
    no run-time check (checks = 0); the row's addresses are constant offsets of one pointer (common)."""
    import adoffload as ado
    from adoffload.codegen.gpu.shared_atomics import aggregate_shared_adds
    from adoffload.ir import import_module
    side, tm, bk = kernels.REGISTER_SGEMM_SHAPES[shape]
    reverse = ado.vjp(kernels.make_register_sgemm(side, tm, bk, ado.f32), ("A", "B"))
    args = import_module(reverse.module_text()).functions[reverse.body_name].args
    shared = [k for k, a in enumerate(args) if a.name.startswith(("shared.", "d_shared."))]
    text, used = aggregate_shared_adds(reverse.module_text(), reverse.body_name, range(shared[0], shared[-1] + 1),
                                       (side, side))
    assert forms <= used
    assert "call void @\"adoffload.shared_fadd_group." not in text     # every row went into a batch
    if _have(tools.find_ptxas):
        nvptx.ptxas_check(reverse.compiled("nvptx", arch="sm_90").artifact, "sm_90")


def _pointers(body: str):
    """The pointer arguments of the calls of ``@use`` in a function of ``body`` (its ``ptr %s`` is a
    shared array, ``i64 %t`` a thread index, ``i64 %k`` a counter, ``ptr %q`` a pointer table)."""
    from adoffload.ir import import_module
    text = (f"declare void @use(ptr)\ndefine void @f(ptr %s, i64 %t, i64 %k, ptr %q) {{\nentry:\n{body}  ret void\n}}\n")
    fn = import_module(text).functions["f"]
    return [inst.operands[0] for inst in fn.instructions() if inst.opcode == "call"]


def test_batch_checks_only_addresses_not_a_constant_apart():
    """A batch exchanges an address only when it is not a constant number of bytes from one it
    already checks (shared_batches.checked_addresses): same root and variable terms."""
    from adoffload.codegen.gpu.shared_batches import checked_addresses, common_offsets
    row = _pointers("  %i = and i64 %t, 15\n  %base = getelementptr float, ptr %s, i64 %i\n"
                    "  %p1 = getelementptr i8, ptr %base, i64 64\n  %j = add nsw i64 %i, 32\n"
                    "  %p2 = getelementptr float, ptr %s, i64 %j\n"
                    "  call void @use(ptr %base)\n  call void @use(ptr %p1)\n  call void @use(ptr %p2)\n")
    assert checked_addresses(row) == 0b001
    assert common_offsets(row) == [0, 64, 128]
    mixed = _pointers("  %i = and i64 %t, 15\n  %a = getelementptr float, ptr %s, i64 %i\n"
                      "  %b = getelementptr float, ptr %s, i64 %k\n  %c = getelementptr i8, ptr %b, i64 4\n"
                      "  %m = mul i64 %i, 3\n  %d = getelementptr float, ptr %s, i64 %m\n"
                      "  %l = load ptr, ptr %q\n  %e = getelementptr [4 x float], ptr %l, i64 0, i64 %i\n"
                      "  %f = getelementptr [4 x float], ptr %l, i64 0, i64 %i\n"
                      "  call void @use(ptr %a)\n  call void @use(ptr %b)\n  call void @use(ptr %c)\n"
                      "  call void @use(ptr %d)\n  call void @use(ptr %e)\n  call void @use(ptr %f)\n")
    # %c is %b + 4; %d's index is another value; %e, %f are not single-index GEPs: both checked
    assert checked_addresses(mixed) == 0b111011
    assert common_offsets(mixed) is None and common_offsets(mixed[1:3]) == [0, 4]


_LOOP = """define void @f(i64 %ti, i64 %tj, ptr %s, ptr %q, ptr %status) {
entry:
  %a = and i64 %ti, 15
  %b = and i64 %tj, 15
  br label %head
head:
  %k = phi i64 [ 0, %entry ], [ %k.next, %latch ]
  PRE
  %i = INDEX
  %row = mul i64 %k, 128
  %e = add i64 %row, %i
  %p = getelementptr float, ptr %s, i64 %e
  br i1 GUARD, label %site, label %fail
fail:
  %old = atomicrmw xchg ptr %status, i64 1 monotonic
  ret void
site:
  BODY
  call void @use(ptr %p)
  %k.next = add i64 %k, 1
  %more = icmp ult i64 %k.next, 8
  br i1 %more, label %latch, label %out
latch:
  br label %head
out:
  ret void
}
declare void @use(ptr)
"""


def _group_uniform(index: str, pre: str = "", guard: str = "true", body: str = "", mask: int = 15) -> bool:
    """Whether shared_uniform proves ``s[k, index]`` (in a loop over k, block (16, 16): lane bits 0-3 are
    tj's, bit 4 ti's) the same in each lane group of ``mask``."""
    from adoffload.codegen.gpu.shared_atomics import _lane_bits
    from adoffload.analysis.lane_groups import GroupUniform
    from adoffload.ir import import_module
    text = _LOOP.replace("PRE", pre).replace("INDEX", index).replace("GUARD", guard).replace("BODY", body)
    fn = import_module(text).functions["f"]
    call = next(i for i in fn.instructions() if i.opcode == "call")
    return GroupUniform(fn, (16, 16), _lane_bits((16, 16))).uniform(call.operands[0], call.parent, mask)


def test_group_uniform_addresses_are_proven():
    """``As[k, ti + 16 m]``: ti and the k counter are the same in the lanes of one ti (mask 15, tj's
    bits); a failed bounds check that returns does not break the proof (a lane that fails is gone)."""
    assert _group_uniform("add i64 %a, 16")
    assert _group_uniform("add i64 %a, 16", pre="%in = icmp ult i64 %tj, %k", guard="%in")
    assert _group_uniform("add i64 %b, 16", mask=16)          # Bs[k, tj + 16 n]: lanes of one tj (ti's bit)


def test_group_uniform_refuses_lane_varying_addresses():
    """Addresses that may differ in a group keep the run-time check: tj through ``and``, ``urem`` or
    ``lshr``, a loaded index, a select on loaded data, a counter under a branch on tj."""
    assert not _group_uniform("add i64 %b, 16")
    assert not _group_uniform("urem i64 %tj, 4")
    assert not _group_uniform("lshr i64 %tj, 8")
    assert not _group_uniform("add i64 %a, 16", mask=16)       # ti's bit in the group
    assert not _group_uniform("load i64, ptr %q")
    assert not _group_uniform("select i1 %c, i64 %a, i64 0", pre="%d = load float, ptr %q\n  %c = fcmp ogt float %d, 0.0")
    # a phi of constants joining the sides of a branch on tj: the lanes of a group took different sides
    split = ("%skip = icmp eq i64 %b, 3\n  br i1 %skip, label %two, label %one\none:\n  br label %join\ntwo:\n"
             "  br label %join\njoin:\n  %w = phi i64 [ 0, %one ], [ 16, %two ]")
    assert not _group_uniform("add i64 %a, %w", pre=split)
    assert _group_uniform("add i64 %a, %w", pre=split.replace("%b, 3", "%a, 3"))


@needs_ptxas
def test_grouped_tile_adds_assemble():
    """Proven addresses (the tiled matmul's): butterflies without the check's exchange; a loaded
    index (permuted_tiled_matmul): the check's ``shfl.idx`` is there."""
    import adoffload as ado
    for dtype in ("f32", "f64"):
        ptx = ado.vjp(kernels.TILED_MATMUL_8[dtype], ("A", "B")).compiled("nvptx", arch="sm_90").artifact
        assert "shfl.sync.idx.b32" not in ptx and "shfl.sync.bfly.b32" in ptx
        nvptx.ptxas_check(ptx, "sm_90")
    ptx = ado.vjp(kernels.permuted_tiled_matmul, ("A", "B")).compiled("nvptx", arch="sm_90").artifact
    assert "shfl.sync.idx.b32" in ptx and "shfl.sync.bfly.b32" in ptx
    nvptx.ptxas_check(ptx, "sm_90")


def test_lane_apart_adjoint_is_right_on_the_host():
    import numpy as np

    import adoffload as ado
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((4, 64)), rng.standard_normal((4, 64))
    right = lambda a: a.reshape(4, 2, 32)[:, :, np.r_[1:32, 0]].reshape(4, 64)      # noqa: E731
    left = lambda a: a.reshape(4, 2, 32)[:, :, np.r_[31, 0:31]].reshape(4, 64)      # noqa: E731
    y, gx = np.zeros((4, 64)), np.zeros((4, 64))
    ado.vjp(_neighbour_product_kernel(ado.f64), ("x",))(x, y, gx, w.copy(), grid=(4, 64))
    np.testing.assert_allclose(y, x * right(x), rtol=1e-14)
    np.testing.assert_allclose(gx, w * right(x) + left(w * x), rtol=1e-12, atol=1e-12)



@ado.kernel(block=64)
def _rows_of_four(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
    """Each thread reads four neighbouring shared elements (a 16-byte aligned row of the tile)."""
    i = ado.tid()
    t = ado.thread_id()
    tile = ado.shared(256, ado.f32)
    for q in range(4):
        tile[t + 64 * q] = x[4 * (i - t) + t + 64 * q]
    ado.sync_threads()
    y[i] = tile[4 * t] + 2.0 * tile[4 * t + 1] + 3.0 * tile[4 * t + 2] + 4.0 * tile[4 * t + 3]


def test_neighbouring_shared_loads_merge_into_vector_loads():
    """The shared arrays' 16-byte alignment is visible to LLVM (codegen/gpu/shared_alignment.py): four
    neighbouring loads become one ld.shared.v4 / ds_read_b128, in the primal and in the adjoint's
    recomputation; the masks that carried the alignment are gone from the final code."""
    ptx = _rows_of_four.compiled("nvptx", arch="sm_90").artifact
    assert "ld.shared.v4" in ptx and "ptrmask" not in ptx
    adjoint = ado.vjp(_rows_of_four, ("x",)).compiled("nvptx", arch="sm_90").artifact
    assert "ld.shared.v4" in adjoint
    asm, _ = _gcn(_rows_of_four, "gfx942")
    assert "ds_read_b128" in asm



def test_pointer_masks_are_removed_before_code_generation():
    """unmask_shared_pointers: a mask of a shared array aligned enough is the pointer; any other mask
    (a less aligned array, a variable mask, foreign IR's own) is done on the integer address; the
    PTX computes the masks it must and assembles without NVPTX's address-space inference seeing one."""
    import llvmlite.binding as llvm
    from adoffload.codegen.gpu.shared_alignment import unmask_shared_pointers
    text = f"""target triple = "{nvptx.NVPTX_TRIPLE}"
@g = addrspace(3) global [64 x i32] undef, align 16
@h = addrspace(3) global [64 x i32] undef, align 4
declare ptr @llvm.ptrmask.p0.i64(ptr, i64)
define ptx_kernel void @k(ptr %out, i64 %m, i64 %t) {{
  %1 = call ptr @llvm.ptrmask.p0.i64(ptr addrspacecast (ptr addrspace(3) @g to ptr), i64 -16)
  %2 = call ptr @llvm.ptrmask.p0.i64(ptr addrspacecast (ptr addrspace(3) @h to ptr), i64 -16)
  %p = getelementptr i8, ptr %out, i64 %t
  %3 = tail call align 8 ptr @llvm.ptrmask.p0.i64(ptr %p, i64 %m)
  %a = load float, ptr %1
  %b = load float, ptr %2
  %c = load float, ptr %3
  %s = fadd float %a, %b
  %s2 = fadd float %s, %c
  store float %s2, ptr %out
  ret void
}}
"""
    unmasked = unmask_shared_pointers(llvm.parse_assembly(text))
    body = str(unmasked)
    assert "call ptr @llvm.ptrmask" not in body
    assert "%1 = getelementptr i8, ptr addrspacecast (ptr addrspace(3) @g to ptr), i64 0" in body
    assert "and i64 %unmask.2.address, -16" in body and "and i64 %unmask.3.address, %m" in body
    ptx = nvptx.nvptx_target_machine("sm_90").emit_assembly(unmasked)
    assert ptx.count("and.b64") == 2


def test_rows_of_four_and_their_gradient_on_the_host():
    x = np.linspace(-1.0, 2.0, 512).astype(np.float32)
    y = np.zeros(128, np.float32)
    _rows_of_four(x, y, grid=128)
    weights = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    np.testing.assert_allclose(y, x.reshape(128, 4) @ weights, rtol=1e-6)
    grad = ado.vjp(_rows_of_four, ("x",))
    dx = np.zeros_like(x)
    grad(x, y, dx, np.ones(128, np.float32), grid=128)
    np.testing.assert_allclose(dx, np.tile(weights, 128), rtol=1e-6)


@pytest.mark.parametrize("name, threads, blocks", [("matmul", 16, 32), ("reverse", 8, 32)])
def test_block_entries_ask_for_512_resident_threads(name, threads, blocks):
    """Block kernels' PTX states its block size and asks for 512 resident threads per SM (at most
    32 blocks), which caps registers at 128 (nvptx.resident_threads): the tiled SGEMM's adjoint ran
    1.4-1.6x faster."""
    ptx = KERNELS[name].compiled("nvptx", arch="sm_90").artifact
    assert f".maxntid {threads}, 1, 1\n.minnctapersm {blocks}\n{{" in ptx
    if _have(tools.find_ptxas):
        nvptx.ptxas_check(ptx, "sm_90")


def test_resident_threads_of_a_256_thread_block():
    ptx = nvptx.resident_threads(".visible .entry k(\n)\n{\n ret;\n}\n", 256)
    assert ".maxntid 256, 1, 1\n.minnctapersm 2\n{" in ptx
