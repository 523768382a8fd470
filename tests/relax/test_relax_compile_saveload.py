"""A compiled model saved with ``Executable.save`` runs after ``Executable.load`` in a fresh
Python process and gives the same result as before saving."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

import workbench as wb
from workbench import relax
from workbench.runtime.relax_vm import Executable

from relax_compile_models import MODELS, input_for


def test_relax_compile_save_load_fresh_process(tmp_path):
    mod, names, params, ref = MODELS["transformer"][0]()
    exe = relax.build(mod, "llvm")
    path = tmp_path / "transformer.wbexe"
    exe.save(path)
    for i, p in enumerate(params):
        np.save(tmp_path / f"p{i}.npy", p)
    x = input_for("transformer", 3)
    np.save(tmp_path / "x.npy", x)
    expected = relax.VirtualMachine(exe, wb.cpu())["forward"](
        wb.nd.array(x), *[wb.nd.array(p) for p in params]).numpy()
    np.testing.assert_allclose(expected, ref(x, params), rtol=1e-4, atol=1e-5)
    script = textwrap.dedent(f"""
        import numpy as np, workbench as wb
        from workbench.runtime.relax_vm import Executable, VirtualMachine
        exe = Executable.load({str(path)!r})
        params = [wb.nd.array(np.load({str(tmp_path)!r} + f"/p{{i}}.npy"))
                  for i in range({len(params)})]
        x = np.load({str(tmp_path)!r} + "/x.npy")
        out = VirtualMachine(exe, wb.cpu())["forward"](wb.nd.array(x), *params).numpy()
        np.save({str(tmp_path)!r} + "/out.npy", out)
        print(exe.as_text() == open({str(tmp_path)!r} + "/text.txt").read())
    """)
    (tmp_path / "text.txt").write_text(exe.as_text())
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-6)
    # In this process too, the loaded executable runs a different batch size.
    loaded = Executable.load(path)
    x5 = input_for("transformer", 5)
    out5 = relax.VirtualMachine(loaded, wb.cpu())["forward"](
        wb.nd.array(x5), *[wb.nd.array(p) for p in params]).numpy()
    np.testing.assert_allclose(out5, ref(x5, params), rtol=1e-4, atol=1e-5)
