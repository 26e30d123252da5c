"""The kernel language and the contracts of a kernel body.

``types`` (``ado.f32``, ``ado.In[...]``), ``builtins`` (the names used inside kernels: ``ado.tid``,
``ado.sqrt``, ``@ado.func``...), ``signature`` (parameters and how they flatten to LLVM arguments),
``collectives`` (block operations as they appear in body IR), ``status`` (the per-launch status record).
Everything else in adoffload may import these; they import nothing but ``adoffload.errors``.
"""
