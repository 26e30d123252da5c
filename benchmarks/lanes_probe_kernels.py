"""The kernel the session-7 lanes probe (benchmarks/lanes_probe.py) timed: LJ energy + forces with G
threads per atom and a chosen block size; the library form is chemistry/kernels.py's lj_energy_forces_kernel."""
import adoffload as ado
from adoffload.chemistry.kernels import min_image, lj_pair


def make(G, block=128):
    @ado.kernel(block=(block,))
    def lj_ef_lanes(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], neighbors: ado.In[ado.i64, 2],
                    sigma: ado.f64, epsilon: ado.f64, cutoff: ado.f64,
                    e: ado.Out[ado.f64], forces: ado.Out[ado.f64, 2]):
        t = ado.tid()
        n = pos.shape[0]
        i = t // G
        sub = t % G
        rc2 = cutoff * cutoff
        shift = lj_pair(rc2, sigma, epsilon)
        acc = 0.0
        fx = 0.0
        fy = 0.0
        fz = 0.0
        if i < n:
            xi = pos[i, 0]
            yi = pos[i, 1]
            zi = pos[i, 2]
            bx = box[0]
            by = box[1]
            bz = box[2]
            for k in range(sub, neighbors.shape[1], G):
                j = neighbors[i, k]
                if j < 0:
                    break
                dx = min_image(pos[j, 0] - xi, bx)
                dy = min_image(pos[j, 1] - yi, by)
                dz = min_image(pos[j, 2] - zi, bz)
                r2 = dx * dx + dy * dy + dz * dz
                if r2 < rc2:
                    v, dv_dr2 = ado.value_and_grad(lj_pair)(r2, sigma, epsilon)
                    acc = acc + 0.5 * (v - shift)
                    fx = fx + 2.0 * dv_dr2 * dx
                    fy = fy + 2.0 * dv_dr2 * dy
                    fz = fz + 2.0 * dv_dr2 * dz
        h = G // 2
        while h > 0:
            acc = acc + ado.shuffle_down(acc, h)
            fx = fx + ado.shuffle_down(fx, h)
            fy = fy + ado.shuffle_down(fy, h)
            fz = fz + ado.shuffle_down(fz, h)
            h = h // 2
        if sub == 0 and i < n:
            e[i] = acc
            forces[i, 0] = fx
            forces[i, 1] = fy
            forces[i, 2] = fz
    return lj_ef_lanes
