"""The FFI handlers in isolation: a hand-written body through the CPU handler; GPU handlers compile."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adoffload.language import types as T
from adoffload.codegen import abi
from adoffload.codegen.host.program import HostProgram
from adoffload.jax import ffi_layout
from adoffload.jax import handler as handlers
from adoffload.language.signature import KernelSignature, Param

BODY = r'''
define void @axpy(i64 %i, double %a, ptr %x, i64 %nx, ptr %out, i64 %no, ptr %status) {
entry:
  %ok = icmp ult i64 %i, %nx
  br i1 %ok, label %body, label %oob
oob:
  %old = atomicrmw xchg ptr %status, i64 1 monotonic
  %first = icmp eq i64 %old, 0
  br i1 %first, label %record, label %exit
record:
  %s1 = getelementptr i64, ptr %status, i64 1
  store i64 1, ptr %s1
  %s2 = getelementptr i64, ptr %status, i64 2
  store i64 %i, ptr %s2
  %s3 = getelementptr i64, ptr %status, i64 3
  store i64 0, ptr %s3
  br label %exit
body:
  %px = getelementptr double, ptr %x, i64 %i
  %po = getelementptr double, ptr %out, i64 %i
  %vx = load double, ptr %px
  %m = fmul double %a, %vx
  store double %m, ptr %po
  br label %exit
exit:
  ret void
}
'''
SIGNATURE = KernelSignature("axpy", (Param("a", T.f64), Param("x", T.In[T.f64]), Param("out", T.Out[T.f64])), 1)


@pytest.fixture(autouse=True)
def on_the_host():
    """These tests exercise the host handler: run them on JAX's CPU device even where a GPU is the default."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


@pytest.fixture(scope="module")
def target():
    flat = [f.llvm_type for f in SIGNATURE.flat_params()]
    program = HostProgram(abi.add_host_entry(BODY, "axpy", flat, 1))
    layout = ffi_layout.layout_for(SIGNATURE, scalars_by_reference=False)
    handler = handlers.CompiledHandler(handlers.cpu_handler_ir(layout, program.address("axpy.host")),
                                       keep_alive=[program])
    jax.ffi.register_ffi_target("adoffload_test_axpy", handler.capsule(), platform="cpu")
    return handler


def _call(a, x, n):
    return jax.ffi.ffi_call("adoffload_test_axpy", jax.ShapeDtypeStruct((n,), jnp.float64))(
        a, x, grid=np.array([n], np.int64))


def test_cpu_handler_fills_slots_and_runs_the_host_entry(target):
    x = jnp.arange(6.0)
    np.testing.assert_allclose(jax.jit(_call, static_argnums=2)(jnp.float64(2.5), x, 6), 2.5 * np.arange(6.0))


def test_cpu_handler_turns_the_status_record_into_an_error(target):
    x = jnp.arange(4.0)
    with pytest.raises(Exception, match=r"kernel 'axpy': index 4 out of bounds for axis 0 of array 'x'"):
        jax.block_until_ready(jax.jit(_call, static_argnums=2)(jnp.float64(1.0), x, 6))
    np.testing.assert_allclose(jax.jit(_call, static_argnums=2)(jnp.float64(3.0), x, 4), 3 * np.arange(4.0))


def test_layout_reads_inout_from_results_and_scalars_by_reference():
    sig = KernelSignature("k", (Param("a", T.f32), Param("y", T.InOut[T.f32, 2]), Param("o", T.Out[T.i32])), 2)
    layout = ffi_layout.layout_for(sig, scalars_by_reference=True)
    assert [(s.kind, s.side, s.buffer, s.dim) for s in layout.slots] == [
        ("ref", "arg", 0, 0), ("data", "ret", 0, 0), ("dim", "ret", 0, 0), ("dim", "ret", 0, 1),
        ("data", "ret", 1, 0), ("dim", "ret", 1, 0)]
    assert layout.zeroed == ((1, 1, 4),)


@pytest.mark.parametrize("sync", [False, True])
def test_gpu_handler_compiles_for_cuda_and_rocm(sync):
    # Placeholder addresses: this checks the generated IR verifies and JIT-compiles (no GPU here).
    layout = ffi_layout.layout_for(SIGNATURE, scalars_by_reference=True)
    tables = ffi_layout.GpuTables((0, 0), (0, 0), (0, 0), launch=0, synchronize=0, memset=0)
    text = handlers.gpu_handler_ir(layout, tables, sync=sync)
    compiled = handlers.CompiledHandler(text)
    assert compiled.address
    assert "store i32 1, ptr" in text or sync     # command-buffer compatible unless it synchronizes


def test_rocm_handler_is_generated_through_the_same_path_and_compiles():
    # No AMD GPU here: the ROCm handler (hipModuleLaunchKernel, hipMemsetD8Async) is checked by
    # compiling it for the host, with placeholder addresses for the HIP entry points.
    import adoffload as ado
    from adoffload.jax.targets import rocm_handler_ir

    @ado.kernel
    def scale(a: ado.f64, x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = a * x[i]
    text = rocm_handler_ir(scale)
    handler = handlers.CompiledHandler(text)
    assert handler.address != 0
    assert "ptr %" in text and "define ptr @handler" in text
    from adoffload.errors import ToolNotFoundError
    try:
        hsaco = scale.compiled("amdgpu", arch="gfx942", scalars_by_reference=True).hsaco
    except ToolNotFoundError as missing:          # CI installs the AMD extra; other machines may not
        pytest.skip(f"no ld.lld to link the code object: {missing}")
    assert hsaco[:4] == b"\x7fELF"


def _traits(text: str) -> int:
    """The traits the handler declares: the last i32 store of its metadata block."""
    block = text.split("\nmetadata:\n")[1].split("\nexecute:\n")[0]
    return int([line for line in block.splitlines() if "store i32" in line][-1].split()[2].rstrip(","))


def _tape_kernel():
    import adoffload as ado
    from adoffload.chemistry import kernels
    adjoint = ado.vjp(kernels.lj_energy, ["pos", "sigma", "epsilon"])
    kernel = ado.vjp(adjoint, ["pos", "sigma", "epsilon"])       # reverse over reverse: a dynamic tape
    assert kernel.tape is not None
    return kernel


def test_tape_layout_skips_the_hidden_params_and_finds_their_slots():
    kernel = _tape_kernel()
    layout = ffi_layout.layout_for(kernel.signature, scalars_by_reference=False,
                                 count_signature=kernel.count_kernel.signature)
    flat = [f.name for f in kernel.signature.flat_params()]
    hidden = [k for k, s in enumerate(layout.slots) if s.kind == "hidden"]
    assert [flat[k] for k in hidden] == ["adoffload_tape", "adoffload_tape.shape0",
                                         "adoffload_tape_offsets", "adoffload_tape_offsets.shape0"]
    assert (layout.tape.tape_slot, layout.tape.offsets_slot) == (hidden[0], hidden[2])
    visible = [s for s in layout.slots if s.kind != "hidden"]
    n_results = sum(1 for p in kernel.signature.visible_params if p.is_array and p.type.writes)
    assert max(s.buffer for s in visible if s.side == "ret") == n_results - 1
    # the counting kernel shares the primal's slots; the arrays its primal writes get scratch copies
    count_flat = kernel.count_kernel.signature.flat_params()
    assert layout.tape.shared == len(count_flat) - 2 and flat[:layout.tape.shared] == [f.name for f in count_flat[:-2]]
    written = {flat[slot]: copy for slot, _, _, copy in layout.tape.scratch}
    assert written == {"e": False, "d_pos": True, "d_sigma": True, "d_epsilon": True, "d_e": True}


def test_tape_handlers_compile_for_cpu_cuda_and_rocm_and_never_join_command_buffers():
    from adoffload.jax.targets import rocm_handler_ir
    kernel = _tape_kernel()
    signature, counting = kernel.signature, kernel.count_kernel.signature
    cpu = handlers.cpu_handler_ir(ffi_layout.layout_for(signature, scalars_by_reference=False,
                                                      count_signature=counting), 0, 0)
    assert handlers.CompiledHandler(cpu).address
    layout = ffi_layout.layout_for(signature, scalars_by_reference=True, count_signature=counting)
    for sync in (False, True):
        tables = ffi_layout.GpuTables((0, 0), (0, 0), (0, 0), launch=0, synchronize=0, memset=0,
                                    count_functions=(0, 0))
        text = handlers.gpu_handler_ir(layout, tables, sync=sync)
        assert handlers.CompiledHandler(text).address
        assert _traits(text) == 0 and "cuMemcpyDtoHAsync" in text and "@count_functions" in text
        # the counts are scanned on the device (tape_scan.py), per tape level; only the total comes back
        assert all(f"@scan_{name}" in text for name in ("chunk_sums", "serial_scan", "chunk_scan"))
        assert len(re.findall(r"call i32 %fn\d+\(ptr %htotal\d+, ptr %sums\d+, i64 8,", text)) == len(layout.tapes)
    rocm = rocm_handler_ir(kernel)
    assert handlers.CompiledHandler(rocm).address
    assert _traits(rocm) == 0 and "hipMemcpyDtoHAsync" in rocm and "@scan_chunk_scan" in rocm


def test_plain_gpu_handlers_stay_command_buffer_compatible():
    layout = ffi_layout.layout_for(SIGNATURE, scalars_by_reference=True)
    tables = ffi_layout.GpuTables((0,), (0,), (0,), launch=0, synchronize=0, memset=0)
    assert _traits(handlers.gpu_handler_ir(layout, tables)) == ffi_layout.TRAIT_COMMAND_BUFFER_COMPATIBLE
    assert _traits(handlers.gpu_handler_ir(layout, tables, sync=True)) == 0


def test_gpu_handlers_launch_a_thread_per_k_elements():
    # A vectorized kernel (codegen/gpu/vectorize.py) runs k elements per thread: the handler divides
    # the grid's total by k (rounding up) before sizing the blocks; k = 1 keeps the old launch.
    import adoffload as ado
    from adoffload.jax.targets import Variant, gpu_options, rocm_handler_ir
    from adoffload.kernels.launch import facts_proven_by

    @ado.kernel
    def scale(a: ado.f32, x: ado.In[ado.f32], y: ado.Out[ado.f32]):
        i = ado.tid()
        y[i] = a * x[i]
    one, four = rocm_handler_ir(scale), rocm_handler_ir(scale, elements_per_thread=4)
    assert "udiv i64" in four and ", 4\n" in four.split("%threads")[1] and "%threads" not in one
    handlers.CompiledHandler(four)
    # The call's static shapes prove the bounds checks away (x and y have the grid's length),
    # which lets the k calls of the body merge into 128-bit accesses.
    variant = Variant(proven=facts_proven_by(scale, {1: (1 << 20,), 2: (1 << 20,)}, (1 << 20,)), elements_per_thread=4)
    assert variant.proven and not facts_proven_by(scale, {1: (10,), 2: (1 << 20,)}, (1 << 20,)) >= variant.proven
    assert gpu_options(scale, variant) == {"proven": variant.proven, "noalias": True}
    ptx = scale.compiled("nvptx", arch="sm_90", scalars_by_reference=True, elements_per_thread=4,
                         **gpu_options(scale, variant)).ptx
    assert re.search(r"ld\.global\.nc\.v4\.[fb]32", ptx) and re.search(r"st\.global\.v4\.[fb]32", ptx)

    @ado.kernel
    def accumulate(x: ado.In[ado.f32], y: ado.InOut[ado.f32]):
        i = ado.tid()
        y[i] = y[i] + x[i]
    assert "noalias" not in gpu_options(accumulate, Variant(elements_per_thread=4))   # InOut: XLA may alias it


def test_calls_compile_away_the_bounds_checks_their_static_shapes_prove():
    # Inside jit the shapes are static: checks that the grid and the shapes prove (x and y as
    # long as the grid) are left out, as the numpy launcher does per launch. A call whose
    # shapes prove nothing keeps them, and still reports an out-of-bounds index.
    import adoffload as ado

    @ado.kernel
    def shift(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = x[i + 1] + x[i]
    f = ado.jax_kernel(shift, grid=lambda x: x.shape[0] - 1, out_shapes=lambda x: {"y": (x.shape[0] - 1,)})
    x = jnp.arange(6.0)
    np.testing.assert_allclose(jax.jit(f)(x), np.arange(5.0) * 2 + 1)
    proven_sets = {key[3] for key in shift._compiled if key[0] == "host"}      # (target, arch, by_ref, proven, ...)
    assert any(proven_sets), proven_sets
    g = ado.jax_kernel(shift, grid=6, out_shapes={"y": (6,)})
    with pytest.raises(Exception, match="index 6 out of bounds"):
        jax.block_until_ready(jax.jit(g)(x))


@pytest.mark.parametrize("pool", ["1", "0"])
def test_large_cpu_calls_share_the_grid_with_xlas_thread_pool(pool, monkeypatch):
    # Above 2 * MIN_CHUNK_THREADS threads the CPU handler splits the grid into chunks that XLA's
    # pool threads and the calling thread claim (cpu_parallel.py); ADOFFLOAD_JAX_CPU_POOL=0
    # keeps one thread. Both give the same results, errors included.
    import adoffload as ado
    from adoffload.jax import cpu_parallel
    monkeypatch.setenv(cpu_parallel.ENV_VAR, pool)

    @ado.kernel
    def wave(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        acc = 0.0
        for k in range(20):
            acc = acc + ado.sin(x[i] * k)
        y[i] = acc

    @ado.kernel
    def reads_past(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = x[i + 1]

    n = 20 * cpu_parallel.MIN_CHUNK_THREADS + 3
    x = jnp.linspace(0.0, 1.0, n)
    got = np.asarray(jax.jit(ado.jax_kernel(wave))(x))
    expected = sum(np.sin(np.asarray(x) * k) for k in range(20))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(Exception, match=f"index {n} out of bounds"):
        jax.block_until_ready(jax.jit(ado.jax_kernel(reads_past, out_shapes={"y": x.shape}))(x))
    for _ in range(3):          # the pool's late tasks never touch a finished call's memory
        np.testing.assert_allclose(np.asarray(jax.jit(ado.jax_kernel(wave))(x)), expected, rtol=1e-12, atol=1e-12)
    from adoffload.jax.targets import _TARGETS
    texts = [t.handler.text for t in _TARGETS.values() if t.kernel is wave]
    assert texts and all(("@pool.task" in text) == (pool == "1") for text in texts)


def test_bodies_with_loops_are_split_into_smaller_chunks():
    # A neighbor-list loop makes each thread heavy, so the CPU handler shares smaller grids.
    import adoffload as ado
    from adoffload.chemistry import kernels
    from adoffload.jax import cpu_parallel

    @ado.kernel
    def copy(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = x[i]
    assert cpu_parallel.min_chunk_threads(copy.module_text(), copy.body_name) == cpu_parallel.MIN_CHUNK_THREADS
    lj = kernels.lj_energy
    assert cpu_parallel.min_chunk_threads(lj.module_text(), lj.body_name) == cpu_parallel.MIN_CHUNK_THREADS_LOOPING
    assert cpu_parallel.MIN_CHUNK_THREADS_LOOPING < cpu_parallel.MIN_CHUNK_THREADS


def test_function_cells_are_read_at_every_call_and_written_after_compilation():
    """The tables a tiered -O3 swap writes (codegen/gpu/tiered.py): the optimizer must not fold them."""
    from adoffload.jax.handler_ir import Emitter, table
    e = Emitter()
    e.lines.append("define ptr @handler(ptr %frame) {")
    e.label("entry")
    index = e.fresh("i")
    e.emit(f"{index} = ptrtoint ptr %frame to i64")
    e.emit(f"ret ptr {e.cell('@functions', index)}")
    e.lines.append("}")
    text = table("functions", (111, 222), cells=True) + "\n" + "\n".join(e.lines) + "\n"
    handler = handlers.CompiledHandler(text)
    import ctypes
    call = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(handler.address)
    assert (call(0), call(1)) == (111, 222)
    handler.write_cell("functions", 1, 333)
    assert (call(0), call(1)) == (111, 333)
    with pytest.raises(IndexError):
        handler.write_cell("functions", 2, 1)
    with pytest.raises(KeyError):
        handler.write_cell("statuses", 0, 1)


def test_gpu_handlers_read_every_function_from_a_cell():
    layout = ffi_layout.layout_for(SIGNATURE, scalars_by_reference=True)
    tables = ffi_layout.GpuTables((5, 6), (0, 0), (0, 0), launch=0, synchronize=0, memset=0)
    text = handlers.gpu_handler_ir(layout, tables)
    assert "@functions = global [2 x ptr]" in text and "load atomic ptr" in text
    handler = handlers.CompiledHandler(text)
    handler.write_cell("functions", 1, 7)
    assert ctypes_value(handler.program.global_address("functions") + 8) == 7


def ctypes_value(address):
    import ctypes
    return ctypes.c_void_p.from_address(address).value


@pytest.mark.parametrize("n", [40, 700])
def test_small_cpu_calls_run_a_serial_build_with_plain_atomics(n):
    # A grid under two of the handler's chunks runs on XLA's calling thread anyway, so a body with
    # update atomics (the reverse kernel's d_x[j] += ...) is built serial (codegen/host/serial.py:
    # plain read-modify-writes) and its handler has no pool code; a larger grid keeps both.
    import adoffload as ado
    from adoffload.jax import cpu_parallel
    from adoffload.jax.targets import _TARGETS
    jax.config.update("jax_enable_x64", True)

    @ado.kernel
    def pairs(x: ado.In[ado.f64], w: ado.In[ado.f64], e: ado.Out[ado.f64]):
        i = ado.tid()
        acc = 0.0
        for j in range(x.shape[0]):
            if j != i:
                acc = acc + w[0] * ado.exp(-(x[j] - x[i]) * (x[j] - x[i]))
        e[i] = acc

    def plain(x, w):
        d = x[None, :] - x[:, None]
        return jnp.sum(jnp.where(jnp.eye(x.shape[0], dtype=bool), 0.0, w[0] * jnp.exp(-d * d)), axis=1)

    f = ado.jax_kernel(pairs)
    rng = np.random.default_rng(4)
    x, w, c = jnp.asarray(rng.uniform(-2, 2, n)), jnp.asarray([0.8]), jnp.asarray(rng.standard_normal(n))
    loss = lambda fn: jax.jit(jax.grad(lambda x, w: jnp.sum(c * fn(x, w)), argnums=(0, 1)))
    for got, expected in zip(loss(f)(x, w), loss(plain)(x, w)):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    small = n < 2 * cpu_parallel.MIN_CHUNK_THREADS_LOOPING
    reverse = [(key[3], t) for key, t in _TARGETS.items() if getattr(t.kernel, "base", None) is pairs]
    assert reverse, "the gradient should have run the reverse kernel"
    for variant, target in reverse:
        assert variant.serial == small
        assert ("@pool.task" in target.handler.text) == (not small)
        built = "\n".join(k.program.optimized_ir for k in target.handler.keep_alive)
        adds = built.count("atomicrmw fadd")
        # serial: only the entry's one add per chunk of the deferred d_w sum (codegen/gpu/reductions.py) is left
        assert adds <= 1 if small else adds >= 3, f"{adds} atomic adds in the {'serial' if small else 'shared'} build"


def test_calls_adding_into_a_small_table_add_into_a_copy_per_chunk():
    # A parameter table's adjoint (d_params, 9 doubles) takes every thread's adds: over XLA's pool the
    # chunks would fight over its cache lines, so each chunk adds into its own copy of the table on its
    # stack with plain adds and adds the copy into the table once (Variant.private, abi.add_host_entry);
    # the call keeps the pool. The positions' adjoint (more elements than threads) keeps the shared build.
    from adoffload.jax.targets import _TARGETS, SMALL_UPDATE_TARGET
    from tests.research.example import research_example
    jax.config.update("jax_enable_x64", True)
    example = research_example()
    import adoffload as ado
    f = ado.jax_kernel(example.pair_energy)
    rng = np.random.default_rng(8)
    n = 1200                                   # above two chunks of a looping body (2 x 256 threads)
    pos = jnp.asarray(rng.uniform(0.0, 11.0, (n, 3)))
    kind = jnp.asarray(rng.integers(0, 2, n))
    params = jnp.asarray(example.TRUE)
    for argnum in (0, 1):                      # d_params and d_pos: one reverse kernel each
        ours = jax.jit(jax.grad(lambda p, x: jnp.sum(f(x, kind, p)), argnums=argnum))(params, pos)
        plain = jax.jit(jax.grad(lambda p, x: example.plain_jax_energy(p, x, kind), argnums=argnum))(params, pos)
        np.testing.assert_allclose(ours, plain, rtol=1e-11, atol=1e-11 * float(jnp.max(jnp.abs(plain))))
    reverse = {bool(key[3].private): (key[3], t) for key, t in _TARGETS.items()
               if getattr(t.kernel, "base", None) is example.pair_energy and getattr(t.kernel, "mode", None) == "vjp"}
    assert set(reverse) == {True, False}       # d_params: private copies; d_pos (3 n > n elements): shared
    variant, target = reverse[True]
    d_params = [k for k, p in enumerate(target.kernel.signature.flat_params()) if p.name == "d_params"]
    assert variant.private == ((d_params[0], 2, "double"),) and not variant.serial
    assert "@pool.task" in target.handler.text and "@pool.task" in reverse[False][1].handler.text
    built = "\n".join(k.program.optimized_ir for k in target.handler.keep_alive)
    assert "%private" in built                  # the entry's stack copy, flushed with atomic adds
    assert 9 <= SMALL_UPDATE_TARGET and 9 < n     # d_params: small, fewer elements than threads


def test_private_updates_admit_only_arrays_the_body_only_adds_into():
    from adoffload.codegen.host.serial import private_updates
    head = "define void @k(i64 %tid0, ptr %a, i64 %a.n, ptr %b, i64 %b.n, ptr %status) {\n"
    adds = """  %p = getelementptr double, ptr %a, i64 %tid0
  %q = getelementptr inbounds i8, ptr %p, i64 8
  %old = atomicrmw fadd ptr %q, double 1.0 monotonic, align 8
  %i = getelementptr i64, ptr %b, i64 2
  %old.2 = atomicrmw add ptr %i, i64 1 monotonic, align 8
  %flag = atomicrmw xchg ptr %status, i64 1 monotonic, align 8
"""
    assert private_updates(head + adds + "  ret void\n}\n", "k") == {1: "double", 3: "i64"}
    for extra in ("  %x = load double, ptr %p, align 8\n",                     # the body reads the array
                  "  store double 0.0, ptr %a, align 8\n",                     # or stores to it
                  "  call void @adoffload.uniform_fadd.f64(ptr %a, double 2.0)\n",   # an add the walk does not see
                  "  %m = atomicrmw fmax ptr %q, double 1.0 monotonic, align 8\n",   # not an add
                  "  %z = atomicrmw volatile fadd ptr %q, double 1.0 monotonic, align 8\n"):
        assert private_updates(head + adds + extra + "  ret void\n}\n", "k") is None, extra
    assert private_updates(head + "  ret void\n}\n", "k") is None    # no update atomics: nothing to do


def test_update_roots_follow_geps_and_casts_to_the_parameters():
    from adoffload.codegen.host.serial import update_roots
    text = """
define void @k(i64 %tid0, ptr %a, ptr %"b.x", ptr %c, ptr %status) {
  %p = getelementptr double, ptr %a, i64 %tid0
  %q = getelementptr inbounds nuw i8, ptr %p, i64 8
  %old = atomicrmw fadd ptr %q, double 1.0 monotonic, align 8
  %r = addrspacecast ptr %"b.x" to ptr addrspace(1)
  %s = getelementptr double, ptr addrspace(1) %r, i64 3
  %old.2 = atomicrmw fadd ptr addrspace(1) %s, double 1.0 monotonic, align 8
  %flag = atomicrmw xchg ptr %status, i64 1 monotonic, align 8
  call void @adoffload.uniform_fadd.f64(ptr %c, double 2.0)
  ret void
}
"""
    assert update_roots(text, "k") == {1, 2}        # not the status (xchg), not the uniform add into %c
